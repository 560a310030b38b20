# limits: memory_mb=160
# System V shared memory, touched then detached: 4 segments of 64 MiB that no process maps.
import ctypes
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_PRIVATE, IPC_CREAT, SIZE = 0, 0o1000, 64 << 20
made = 0
for _ in range(4):
    segment = libc.shmget(IPC_PRIVATE, SIZE, IPC_CREAT | 0o600)
    if segment < 0:
        print("shmget:", __import__("os").strerror(ctypes.get_errno()))
        break
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, SIZE)
    libc.shmdt(ctypes.c_void_p(address))
    made += 1
time.sleep(1)
if made == 4:
    print("BREACHED: 256 MiB of detached System V memory under a 160 MiB limit")
