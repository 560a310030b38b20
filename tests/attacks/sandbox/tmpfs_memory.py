# limits: memory_mb=160
# The run's own /tmp is memory too: 250 MiB of files (50 MiB each, under the file-size limit)
# under a 160 MiB limit, in a /tmp of 512 MiB.
import time

for k in range(5):
    with open(f"/tmp/fill{k}", "wb") as handle:
        handle.write(b"\1" * (50 << 20))
time.sleep(1)
print("BREACHED: 250 MiB in /tmp under a 160 MiB limit")
