# Another process of the run (nbval's pytest beside the student's kernel is one): attach to it
# with ptrace, read its memory with process_vm_readv.
import ctypes
import os
import time

libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH = 16, 17
secret = ctypes.create_string_buffer(b"the other process's secret")
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
if libc.ptrace(PTRACE_ATTACH, child, None, None) == 0:
    print("BREACHED: ptrace attached to another process of the run")
    os.waitpid(child, 0)
    libc.ptrace(PTRACE_DETACH, child, None, None)
print("ptrace:", os.strerror(ctypes.get_errno()))


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


copy = ctypes.create_string_buffer(64)
local, remote = IoVec(ctypes.addressof(copy), 26), IoVec(ctypes.addressof(secret), 26)
if libc.process_vm_readv(child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 26:
    print("BREACHED: process_vm_readv read another process's memory")
print("process_vm_readv:", os.strerror(ctypes.get_errno()))
os.kill(child, 9)
