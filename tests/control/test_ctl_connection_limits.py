"""The control socket keeps at most 64 connections: one more is answered with
an error line and closed, and NBD clients can still connect (idle control
connections once used up the daemon's descriptors). A request longer than
1 MiB gets an error line, then EOF, instead of a silent close. (The idle
timeout, 30 s, is checked with small limits in unit-daemon-control-server.)
"""
import json
import socket
import sys

import nbd

from nbdsched_test.daemon import Daemon, one_ram_export
from nbdsched_test.verdict import check


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    return s


def read_line(s):
    out = b""
    try:
        while not out.endswith(b"\n"):
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError as e:
        return f"<{e}>"
    return out.decode()


def main():
    with Daemon(one_ram_export(), "ctl-limits") as d:
        idle = [connect(d.control) for _ in range(64)]
        one_more = connect(d.control)
        line = read_line(one_more)
        check(line.startswith("{") and "too many control connections" in json.loads(line)["error"],
              f"the 65th control connection gets an error line: {line!r}")
        check(one_more.recv(1) == b"", "... and is closed")
        h = nbd.NBD()
        h.connect_uri(d.uri("default"))
        h.pread(4096, 0)
        h.shutdown()
        check(True, "an NBD client connects meanwhile")
        check(d.wait_log("64 connections are open"), "the refusal is logged")
        for s in idle:
            s.close()
        check("groups:" in d.ctl("list"), "once they close, ctl is served again")

        s = connect(d.control)
        s.sendall(b"x" * ((1 << 20) + 1))
        line = read_line(s)
        check(line.startswith("{") and json.loads(line)["error"] == "request longer than 1 MiB",
              f"a request over 1 MiB is answered with an error: {line[:200]!r}")
        s.shutdown(socket.SHUT_WR)
        check(s.recv(1) == b"", "... then closed")
        s.close()

        s = connect(d.control)
        s.sendall(b"y" * (2 << 20))   # more than the daemon reads: it drops the rest
        line = read_line(s)
        check("request longer than 1 MiB" in line, f"also when the client sends 2 MiB: {line[:200]!r}")
        s.close()
        check("groups:" in d.ctl("list"), "the daemon serves on")
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
