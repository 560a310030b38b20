# limits: memory_mb=160
# A nested user namespace, root in it, mounts a tmpfs of its own (no --size of the sandbox's)
# and fills 300 MiB of it (files of 50 MiB: under the file-size limit).
import subprocess

script = (
    "mkdir -p /tmp/big && mount -t tmpfs -o size=12g none /tmp/big && "
    "for k in 1 2 3 4 5 6; do head -c 50M /dev/zero > /tmp/big/f$k || exit 1; done && sleep 1 && echo filled"
)
done = subprocess.run(
    ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script], capture_output=True, text=True
)
if "filled" in done.stdout:
    print("BREACHED: 300 MiB in a nested tmpfs under a 160 MiB limit")
print("unshare:", done.stderr.strip()[-200:])
