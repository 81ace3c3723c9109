#!/usr/bin/python3
"""A TCP socket that systemd passes (here systemd-socket-activate) on an
address that is not loopback, without TLS required, meets the rule a
`listen:` entry meets: the daemon refuses to start with the same message
unless a `listen:` entry says `insecure: true`, and then it serves and logs
the warning. The client connects through 127.0.0.1 to the socket bound on
0.0.0.0 (each daemon lives a second or two, with an empty RAM export).

usage: activation_plaintext_test.py NBDSCHED"""
import shutil
import socket
import sys
import time

from nbdsched_test.daemon import Daemon, one_ram_export
from nbdsched_test.process import free_port, run_bounded
from nbdsched_test.verdict import Checks, skip

MESSAGE = "(not loopback) without TLS lets any host read and write every export"


def poke(port):
    """The first connection makes the tool start the daemon (once the tool
    listens); what the daemon sends first."""
    deadline = time.monotonic() + 10
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                return b""
            time.sleep(0.05)
    with s:
        s.settimeout(5)
        try:
            return s.recv(8)
        except OSError:
            return b""


def activated(daemon, tool, config, tag):
    port = free_port()
    d = Daemon(config, tag, binary=daemon, control=False,
               wrapper=[tool, "-l", f"0.0.0.0:{port}", "--fdname=nbd-tcp"], wait=False)
    return d, port


def main(daemon):
    tool = shutil.which("systemd-socket-activate")
    if not tool:
        skip("systemd-socket-activate is not installed (apt-get install systemd)")
    checks = Checks()

    d, port = activated(daemon, tool, one_ram_export(), "plain")
    try:
        greeting = poke(port)
        try:
            status = d.proc.wait(timeout=20)
        except Exception:
            status = "still running"
        checks.check("an activated 0.0.0.0 socket without TLS required: the daemon does not start",
                     status not in (0, "still running"), f"status {status}")
        checks.check("nothing served on it", not greeting.startswith(b"NBDMAGIC"), repr(greeting))
        checks.check("the error is the listen: one", MESSAGE in d.log() and "(activated)" in d.log(),
                     d.log_tail(2).strip())
    finally:
        d.stop()

    insecure = "listen:\n  - {unix: \"{dir}/own.sock\", insecure: true}\n" + one_ram_export()
    d, port = activated(daemon, tool, insecure, "insecure")
    try:
        greeting = poke(port)
        checks.check("with insecure: true in listen: it serves", greeting.startswith(b"NBDMAGIC"), repr(greeting))
        rc, out = run_bounded(["nbdinfo", "--size", f"nbd://127.0.0.1:{port}/default"])
        checks.check("nbdinfo over the activated socket", rc == 0 and out == str(64 << 20), out)
        checks.check("and warns", "serving without TLS required (insecure: true" in d.log(), d.log_tail(3).strip())
        status = d.stop()
        checks.check("exit status 0 after SIGTERM", status == 0, f"status {status}")
    finally:
        d.stop()
    checks.finish()


if __name__ == "__main__":
    main(sys.argv[1])
