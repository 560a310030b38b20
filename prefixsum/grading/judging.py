"""The judge's process, started once per grading thread: each request is judged in a fork of it.

A fresh Python for every verdict spent seconds importing numba and the package before it read a
byte. :class:`Judges` keeps, for each thread of the grader, one server (``python -m
prefixsum.grading.judging``) that has imported :mod:`.judge` and does nothing else:
for each request it forks a child, which bounds itself (:func:`.limits.limit_process`, as
:func:`.judge.main` does), parses the request, judges and exits. The server never parses what it
relays, so a hostile report can at worst end its own child; the next request gets a fresh fork.

Frames on the server's stdin and stdout: an 8-byte big-endian length, then the bytes. A request
is one frame (the JSON of :mod:`.judge`); a reply is two: ``{"returncode", "stderr"}`` (the
child's exit status and the end of its stderr), then the child's stdout (the verdicts' lines).
"""

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from . import judge, limits

MAX_OUTPUT = 96 << 20
"""Bytes of a child's verdicts relayed at most (a verdict's stepper traces are the largest part)."""
_STDERR_TAIL = 2000


def _read_exactly(stream, size):
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            raise EOFError("the stream ended inside a frame")
        data += chunk
    return bytes(data)


def _frame(data):
    return len(data).to_bytes(8, "big") + data


def _judge_child(request, out, err):
    """In the forked child: bound this process, judge ``request`` (bytes), write the verdicts to fd ``out``."""
    os.dup2(err, 2)
    limits.limit_process(address_space_mb=judge.ADDRESS_SPACE_MB, cpu_s=judge.CPU_S, open_files=judge.OPEN_FILES)
    code = 0
    try:
        with os.fdopen(out, "w") as channel:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (what the checks print is not the output; the child exits)
            judge.judge(json.loads(request), lambda found: (channel.write(json.dumps(found) + "\n"), channel.flush()))
    except BaseException:  # noqa: BLE001  (reported by the exit status and stderr, as a judge process's would be)
        import traceback

        traceback.print_exc()
        code = 1
    sys.stderr.flush()
    os._exit(code)


def serve(stdin, stdout):
    """Judge each request frame of ``stdin`` in a fork; reply on ``stdout``; return at the end of ``stdin``."""
    while True:
        try:
            size = int.from_bytes(_read_exactly(stdin, 8), "big")
            if size <= judge.MAX_REQUEST:
                request = _read_exactly(stdin, size)
            else:  # read past, unkept: the child then fails on an empty request, as a judge reading too much would
                for start in range(0, size, 1 << 20):
                    _read_exactly(stdin, min(1 << 20, size - start))
                request = b""
        except EOFError:
            return
        read_end, write_end = os.pipe()
        with tempfile.TemporaryFile() as errors:
            child = os.fork()
            if child == 0:
                os.close(read_end)
                _judge_child(request, write_end, errors.fileno())
            os.close(write_end)
            output = bytearray()
            with os.fdopen(read_end, "rb") as verdicts:
                for chunk in iter(lambda: verdicts.read(1 << 20), b""):
                    if len(output) < MAX_OUTPUT:
                        output += chunk[: MAX_OUTPUT - len(output)]
            status = os.waitpid(child, 0)[1]
            errors.seek(max(0, os.fstat(errors.fileno()).st_size - _STDERR_TAIL))
            tail = errors.read().decode(errors="replace")
        header = {"returncode": os.waitstatus_to_exitcode(status), "stderr": tail}
        stdout.write(_frame(json.dumps(header).encode()) + _frame(bytes(output)))
        stdout.flush()


class Judges:
    """One judge server per thread of the grader, started on first use with ``env``."""

    def __init__(self, env):
        # The judges run the chapters' setup cells, which import matplotlib: its cache goes in a
        # folder of the batch's, removed by close(), not in a matplotlib-* folder of /tmp that
        # outlives the batch (the grader's user may have no writable home).
        self._home = tempfile.mkdtemp(prefix="prefixsum-judges-")
        self.env = {**env, "MPLCONFIGDIR": self._home}
        self._local = threading.local()
        self._started, self._lock = [], threading.Lock()

    def _server(self):
        server = getattr(self._local, "server", None)
        if server is None or server.poll() is not None:
            os.makedirs(self._home, exist_ok=True)  # again after a close(), for the next batch
            server = subprocess.Popen(
                [sys.executable, "-m", __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
            self._local.server = server
            with self._lock:
                self._started.append(server)
        return server

    def close(self):
        """End every server (each ends at the end of its input, after the request it is judging)."""
        with self._lock:
            started, self._started = self._started, []
        for server in started:
            try:
                server.stdin.close()
            except OSError:  # a server that ended on its own
                pass
            server.stdout.close()
            server.wait()
        shutil.rmtree(self._home, ignore_errors=True)

    def _stop(self, server):
        try:
            os.killpg(server.pid, 9)  # the server and a child it forked: one session
        except ProcessLookupError:
            pass
        server.wait()
        self._local.server = None

    def judge(self, request, timeout):
        """``(returncode, stdout, stderr tail)`` of :mod:`.judge` on ``request`` (bytes).

        ``returncode`` is None, and the server is stopped, when no reply came within ``timeout``
        seconds or the server ended; the third item then says which.
        """
        server = self._server()
        deadline = time.monotonic() + timeout
        try:
            server.stdin.write(_frame(request))
            server.stdin.flush()
            frames = []
            for _ in range(2):
                size = int.from_bytes(self._read(server, 8, deadline), "big")
                frames.append(self._read(server, size, deadline))
        except TimeoutError:
            self._stop(server)
            return None, "", f"no verdict within {timeout:g} s"
        except (OSError, EOFError) as error:
            self._stop(server)
            return None, "", f"the judge's server ended: {error}"
        header = json.loads(frames[0])
        return header["returncode"], frames[1].decode(errors="replace"), header["stderr"]

    @staticmethod
    def _read(server, size, deadline):
        data = bytearray()
        descriptor = server.stdout.fileno()
        while len(data) < size:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([descriptor], [], [], left)[0]:
                raise TimeoutError("no verdict in time")
            chunk = os.read(descriptor, min(size - len(data), 1 << 20))
            if not chunk:
                raise EOFError("the judge server ended")
            data += chunk
        return bytes(data)


def main():
    # What every verdict imports, imported once here, before the forks.
    from ..classroom import references, stepping  # noqa: F401
    from ..classroom.check import observed  # noqa: F401

    limits.limit_process(address_space_mb=judge.ADDRESS_SPACE_MB, open_files=judge.OPEN_FILES)
    serve(sys.stdin.buffer, sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
