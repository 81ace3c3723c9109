"""TCP connections are kept alive: the daemon turns on keepalive probes on
each accepted TCP connection (60 s idle, 6 probes 10 s apart), so an idle
client whose host died is dropped within minutes instead of holding its
connection slot until the daemon restarts. The kernel's own view of the
server's socket (`ss -o`: timer:(keepalive,...)) is the evidence; a
connection on the Unix socket has no such timer and needs none."""
import re
import shutil
import subprocess
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks, skip

CONFIG = """
devices:
  - {name: d0, size: 4MiB}
exports:
  - {name: default, device: d0}
"""


def server_sockets(port):
    """ss lines for the established sockets on the daemon's side of `port`."""
    out = subprocess.run(["ss", "-tnoH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, timeout=10).stdout
    return [line for line in out.splitlines() if line.strip()]


def main():
    if not shutil.which("ss"):
        skip("ss (iproute2) not installed")
    checks = Checks()
    with Daemon(CONFIG, "keepalive", tcp=True) as d:
        h = nbd.NBD()
        h.connect_uri(f"nbd://127.0.0.1:{d.tcp_port}/default")
        h.pwrite(b"k" * 4096, 0)
        # Until the client's (delayed) ACK of the reply arrives, ss shows the
        # retransmission timer instead: look again for up to 5 s.
        deadline = time.monotonic() + 5
        while True:
            lines = server_sockets(d.tcp_port)
            if not any("timer:(on," in x for x in lines) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        checks.check("one established connection on the daemon's port", len(lines) == 1, "\n".join(lines))
        checks.check("the daemon's side of it has a keepalive timer", any("timer:(keepalive" in x for x in lines),
              "\n".join(lines))
        # The first probe waits for 60 s of silence: ss shows the time left
        # ("59sec", "1min"), where the kernel's default would show "119min".
        checks.check("the keepalive timer is the daemon's 60 s, not the kernel's 2 hours",
                     any(re.search(r"timer:\(keepalive,(1min|[1-5]?[0-9]sec)", x) for x in lines), "\n".join(lines))
        h.shutdown()
    checks.finish()


if __name__ == "__main__":
    main()
