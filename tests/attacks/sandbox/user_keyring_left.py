# A key left in the run's user keyring for the next run, which looks for it (a user keyring
# outlives the processes of its uid; runs that share a uid share it).
import ctypes
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING = 10, -4
if sys.argv[1] == "leave":
    key = libc.syscall(
        ADD_KEY, b"user", b"prefixsum-left-behind", b"a note for the next run", 23, KEY_SPEC_USER_KEYRING
    )
    if key > 0:
        print("BREACHED: a key was left in the user keyring")
    print("add_key:", os.strerror(ctypes.get_errno()))
else:
    key = libc.syscall(KEYCTL, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, b"user", b"prefixsum-left-behind", 0)
    if key > 0:
        print("BREACHED: an earlier run's key is here")
    print("keyctl search:", os.strerror(ctypes.get_errno()))
