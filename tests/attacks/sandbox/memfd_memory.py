# limits: memory_mb=160
# Memory that no resident size counts: 8 memfds of 48 MiB (each under the file-size limit),
# written and kept, 384 MiB under a 160 MiB limit.
import os
import time

held = []
try:
    for k in range(8):
        fd = os.memfd_create(f"hog{k}")
        for _ in range(48):
            os.write(fd, b"x" * (1 << 20))
        held.append(fd)
except OSError as error:
    print("memfd_create:", error.strerror)
time.sleep(1)  # the supervisor looks at least every 0.25 s
if len(held) == 8:
    print("BREACHED: 384 MiB of memfd under a 160 MiB limit")
