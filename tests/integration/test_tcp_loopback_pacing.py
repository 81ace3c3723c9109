"""A client on this host is answered from a socket that does not pace:
where the kernel's default congestion control is BBR, the daemon switches
an accepted TCP connection from a loopback address (or from its own
address) to cubic, or reno where cubic is not allowed. BBR's paced sends
over loopback arrive out of order and are retransmitted for nothing
(docs/data-path.md). The kernel's view of the server's socket (`ss -i`
names its congestion control) is the evidence; the client's own socket
keeps the default."""
import shutil
import subprocess

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks, skip

CONFIG = """
devices:
  - {name: d0, size: 4MiB}
exports:
  - {name: default, device: d0}
"""


def sockets(side, port):
    """ss -i output for the established sockets whose `side` ("sport" or
    "dport") is `port`: each socket's line and its info line."""
    return subprocess.run(["ss", "-tniH", "state", "established", f"( {side} = :{port} )"],
                          capture_output=True, text=True, timeout=10).stdout


def main():
    if not shutil.which("ss"):
        skip("ss (iproute2) not installed")
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        default = f.read().strip()
    if not default.startswith("bbr"):
        skip(f"the kernel's default congestion control is {default}, which does not pace: nothing to switch")
    checks = Checks()
    with Daemon(CONFIG, "pacing", tcp=True) as d:
        h = nbd.NBD()
        h.connect_uri(f"nbd://127.0.0.1:{d.tcp_port}/default")
        h.pwrite(b"p" * 4096, 0)
        server, client = sockets("sport", d.tcp_port), sockets("dport", d.tcp_port)
        checks.check("the client's socket has the kernel's default", f" {default} " in f" {client} ", client)
        checks.check("the daemon's side of a loopback connection does not use BBR",
                     " bbr" not in server and (" cubic " in server or " reno " in server), server)
        h.shutdown()
    checks.finish()


if __name__ == "__main__":
    main()
