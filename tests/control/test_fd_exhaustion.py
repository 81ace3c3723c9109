"""Out of file descriptors: the daemon runs under `prlimit --nofile=64`,
plain sockets connect to it and stay idle (no handshake) until a new one is
no longer served (no greeting: accept() fails with EMFILE and the connection
waits in the backlog). While it stays so for a second, the daemon must not
spin on the still readable listening socket: its CPU time over that second
(utime + stime, /proc/PID/stat) is under 30 % of the wall time, and it warns
about accept a bounded number of times, not once per try (a client waiting
on the control socket meanwhile makes it run out there too). A client
connected before keeps reading and writing meanwhile. Once the idle sockets
close, a new client (libnbd, in a child with a deadline) reads the export.
CPU against wall time is a ratio that a noisy host moves: 'speed' suite.
"""
import socket
import sys
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import run_bounded, wait_for
from nbdsched_test.verdict import check, skip

FD_LIMIT = 64
MAX_IDLE = 200   # more than FD_LIMIT: the loop ends by running out, not by this
CONFIG = """
devices:
  - {name: d0, backend: ram, size: 16MiB}
exports:
  - {name: default, device: d0}
limits: {threads: 1, handshake_timeout: 120s}
"""
READ_CLIENT = """import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
sys.stdout.write(h.pread(4096, 0).decode())
h.shutdown()
"""


def greeted(s, timeout):
    """True once the server's first handshake bytes (NBDMAGIC) arrive."""
    s.settimeout(timeout)
    try:
        return s.recv(8, socket.MSG_WAITALL) == b"NBDMAGIC"
    except OSError:
        return False


def accept_warnings(d):
    return sum(1 for line in d.log().splitlines() if ": accept: " in line)


def main():
    with Daemon(CONFIG, "fds", wrapper=["prlimit", f"--nofile={FD_LIMIT}:{FD_LIMIT}"]) as d:
        keeper = nbd.NBD()
        keeper.connect_uri(d.uri("default"))
        keeper.pwrite(b"k" * 4096, 0)

        idle = []
        unserved = None
        while len(idle) < MAX_IDLE:
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)   # the backlog takes it even when accept() fails
            idle.append(s)
            if not greeted(s, 2.0):
                unserved = s
                break
        if unserved is None:
            skip(f"{MAX_IDLE} idle connections were all served: the fd limit did not hold")
        check(len(idle) > 10, f"{len(idle) - 1} idle connections served, then one was not (fd limit {FD_LIMIT})")
        check(d.alive(), "the daemon runs on")
        ctl_waiting = socket.socket(socket.AF_UNIX)   # the control socket runs out as well
        ctl_waiting.connect(d.control)
        idle.append(ctl_waiting)

        time.sleep(0.3)   # the back-off has started
        cpu0, t0 = d.cpu(), time.monotonic()
        time.sleep(1.0)
        cpu1, t1 = d.cpu(), time.monotonic()
        ratio = (cpu1 - cpu0) / (t1 - t0)
        check(ratio < 0.3, f"out of descriptors for {t1 - t0:.2f} s: the daemon used {ratio:.0%} of a CPU "
              "(spinning on accept would be about 100 %)")
        check(not greeted(unserved, 0.1), "the connection beyond the limit is still waiting")
        keeper.pwrite(b"K" * 4096, 4096)
        check(keeper.pread(4096, 0) == b"k" * 4096 and keeper.pread(4096, 4096) == b"K" * 4096,
              "the client connected before reads and writes meanwhile")
        warnings = accept_warnings(d)
        check(1 <= warnings <= 4, f"{warnings} accept warning(s) in the log (one per socket and episode)")

        for s in idle:
            s.close()
        rc, out = run_bounded(["/usr/bin/python3", "-c", READ_CLIENT, d.uri("default")], timeout=20)
        check(rc == 0 and out == "k" * 4096, f"after the idle sockets closed a new client reads the export "
              f"(exit {rc}{': ' + out[-200:] if rc != 0 else ''})")
        check(wait_for(lambda: "accepting again" in d.log(), 5), "the log says when accepting works again")
        check(len(d.listing()["devices"]) == 1, "ctl answers again")
        keeper.shutdown()
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
