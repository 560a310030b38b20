# New user namespaces, by unshare(1) and by a raw clone with CLONE_NEWUSER (glibc's fork never
# passes it), each where the run would be root.
import ctypes
import os
import subprocess

done = subprocess.run(["unshare", "--user", "--map-root-user", "id", "-u"], capture_output=True, text=True)
if done.stdout.strip() == "0":
    print("BREACHED: unshare --user made a namespace where the run is root")
print("unshare:", done.stderr.strip()[-200:])
libc = ctypes.CDLL(None, use_errno=True)
CLONE = {"x86_64": 56, "aarch64": 220}[os.uname().machine]
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
child = libc.syscall(CLONE, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
if child == 0:
    os._exit(0)
if child > 0:
    os.waitpid(child, 0)
    print("BREACHED: clone(CLONE_NEWUSER) made a namespace")
print("clone:", os.strerror(ctypes.get_errno()))
