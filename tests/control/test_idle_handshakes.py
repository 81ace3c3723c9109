"""Idle handshakes cannot lock clients out (limits.max_handshakes, default
128): 1100 sockets that connect and send nothing -- more than the default
max_connections, 1024 -- then a real client still negotiates and reads,
and a client already in transmission carries on. At most max_handshakes of
the idle sockets stay open (the oldest of the peer holding the most are
closed for each newcomer), and the daemon logs it.
"""
import resource
import socket
import sys
import time

import nbd

from nbdsched_test.daemon import Daemon, one_ram_export
from nbdsched_test.process import wait_for
from nbdsched_test.verdict import Checks, skip

IDLE = 1100
MAX_HANDSHAKES = 128   # the default


def still_open(sockets):
    """How many of `sockets` the daemon has not closed (reading what it sent)."""
    n = 0
    for s in sockets:
        try:
            while True:
                if not s.recv(4096):
                    break
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n


def read_ok(h):
    try:
        return len(h.pread(4096, 0)) == 4096
    except nbd.Error as e:
        print(f"read: {e}")
        return False


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = IDLE + 400   # this process's sockets, and the daemon's (it inherits the limit)
    if hard != resource.RLIM_INFINITY and hard < want:
        skip(f"RLIMIT_NOFILE hard limit {hard} is below {want}")
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    c = Checks()
    # Idle sockets must not simply time out while the test looks.
    with Daemon(one_ram_export() + "limits: {handshake_timeout: 60s}\n", "idlehs") as d:
        before = nbd.NBD()
        before.connect_uri(d.uri("default"))
        idle = []
        for _ in range(IDLE):
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)
            s.setblocking(False)
            idle.append(s)
        # Until the daemon has accepted them all: from the 129th on, each closes
        # an older one (or, from the 1025th, is refused, as before max_handshakes).
        wait_for(lambda: d.log().count("max_handshakes (") >= IDLE - MAX_HANDSHAKES or
                 d.log().count("max_connections (") >= IDLE + 1 - 1024, 20)
        time.sleep(0.5)
        open_idle = still_open(idle)
        c.check(f"at most {MAX_HANDSHAKES} of {IDLE} idle sockets are held", open_idle <= MAX_HANDSHAKES,
                f"{open_idle} open")
        new = nbd.NBD()
        try:
            new.connect_uri(d.uri("default"))
            c.check("a new client negotiates while the idle sockets are held", True)
            c.check("and reads", read_ok(new))
            new.shutdown()
        except nbd.Error as e:
            c.check("a new client negotiates while the idle sockets are held", False, str(e))
        c.check("the client in transmission before them carries on", read_ok(before))
        c.check("the daemon logs the closed handshakes", "max_handshakes (128)" in d.log(), d.log_tail(2).strip())
        before.shutdown()
        for s in idle:
            s.close()
        c.check("clean stop", d.stop() == 0)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
