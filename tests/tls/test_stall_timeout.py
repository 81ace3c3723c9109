"""limits.stall_timeout over TLS: a client that stops sending a request it
began, or stops reading its replies, is closed once it has been stalled that
long, as over a plain socket. What is timed is the request's bytes as the
TLS stream delivers them, and the replies' records as the socket takes them.

One daemon with stall_timeout: 1s on a RAM export, TLS required (X.509;
raw NBD over Python's ssl module). Four TLS clients stall: after 10 bytes
of a READ's header; after a WRITE's header and 4 KiB of its 1 MiB payload
(read straight into the request's buffer); after 4 KiB of a 32 KiB payload
(read through the read buffer); after 4 KiB of a 1 MiB WRITE past the
export's end (answered with an error at once, its payload read to be
dropped); a fifth sends 64 READs of 1 MiB and reads nothing. A sixth
sends a 1 MiB WRITE 4 KiB every 0.3 s for 2.4 s, then the rest. At 0.5 s
no stalled connection is closed; within a few seconds all five are, each
with the log line of the plain path (saying how much came); the device
holds no request of theirs; the slow writer is answered, and a TLS
client's WRITE and READ are answered meanwhile and after."""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keys   # noqa: E402
from test_session_end import option, tls_client   # noqa: E402

from nbdsched_test.daemon import Daemon   # noqa: E402
from nbdsched_test.process import wait_for   # noqa: E402
from nbdsched_test.raw_nbd import (CMD_READ, CMD_WRITE, OPT_GO, REP_ACK, REQUEST_MAGIC, closed_by_server,   # noqa: E402
                                   read_reply, write_then_read)
from nbdsched_test.tempdir import TempDir   # noqa: E402
from nbdsched_test.verdict import Checks   # noqa: E402

MIB = 1 << 20
SMALL = 32 << 10
HEADER_SENT = 10
PREFIX = "export 'default': the client has not sent the rest of "
HEADER_LOG = PREFIX + "a request header for"
WRITER_LOG = PREFIX + "a WRITE payload for"
REFUSED_LOG = PREFIX + "a refused WRITE's payload for"
READER_LOG = "export 'default': the client has not read its replies for"
READS = 64


def header(cmd, cookie, offset, length):
    return struct.pack(">IHHQQI", REQUEST_MAGIC, 0, cmd, cookie, offset, length)


def connect(sock, ca_cert):
    """A TLS client past NBD_OPT_GO on the export `default`."""
    s = tls_client(sock, ca_cert)
    name = b"default"
    if option(s, OPT_GO, struct.pack(">I", len(name)) + name + b"\0\0") != REP_ACK:
        raise AssertionError("NBD_OPT_GO over TLS refused")
    return s


def live_client_works(sock, ca_cert, offset, checks, when):
    s = connect(sock, ca_cert)
    ok = write_then_read(s, 8 * MIB + offset)
    s.close()
    checks.check(f"another TLS client's WRITE and READ are answered {when}", ok)


def main():
    keys.need_tools()
    tmp = TempDir("tls-stall")
    ca = keys.Ca(os.path.join(tmp.path, "ca"), "nbdsched test CA")
    pki = ca.issue(os.path.join(tmp.path, "pki"), "server", "localhost", server=True)
    sock = tmp.file("tls.sock")
    config = f"""
limits: {{stall_timeout: 1s}}
tls: {{certificates: {pki}}}
listen:
  - unix: {sock}
    tls: require
devices:
  - {{name: d0, backend: ram, size: 16MiB}}
exports:
  - {{name: default, device: d0}}
"""
    checks = Checks()
    d = Daemon(config, "tls-stall", workdir=tmp.path)
    wait_for(lambda: os.path.exists(sock), 10)
    stalled = []
    try:
        half_header = connect(sock, ca.cert)
        big = connect(sock, ca.cert)
        small = connect(sock, ca.cert)
        refused = connect(sock, ca.cert)
        slow = connect(sock, ca.cert)
        reader = connect(sock, ca.cert)
        stalled = [half_header, big, small, refused, slow, reader]
        start = time.monotonic()
        half_header.sendall(header(CMD_READ, 2, 0, 4096)[:HEADER_SENT])
        big.sendall(header(CMD_WRITE, 1, 0, MIB) + b"b" * 4096)
        small.sendall(header(CMD_WRITE, 3, 2 * MIB, SMALL) + b"s" * 4096)
        refused.sendall(header(CMD_WRITE, 4, 16 * MIB, MIB) + b"r" * 4096)
        reader.sendall(b"".join(header(CMD_READ, 10 + i, (i % 16) * MIB, MIB) for i in range(READS)))
        error, _ = read_reply(refused, 4)
        checks.check("a WRITE past the export's end is answered with an error at once", error != 0)
        slow.sendall(header(CMD_WRITE, 5, 4 * MIB, MIB))
        sent = 0
        checked_early = False
        while time.monotonic() - start < 2.4:
            slow.sendall(b"w" * 4096)
            sent += 4096
            if not checked_early and time.monotonic() - start >= 0.5:
                checked_early = True
                closed = [log for log in (HEADER_LOG, WRITER_LOG, REFUSED_LOG, READER_LOG) if log in d.log()]
                checks.check("at 0.5 s no stalled TLS connection is closed yet", not closed, d.log_tail(5))
                live_client_works(sock, ca.cert, 0, checks, "while five TLS clients are stalled")
            time.sleep(0.3)
        slow.sendall(b"w" * (MIB - sent))
        checks.check("a TLS writer that sends its payload slowly (4 KiB every 0.3 s) is answered",
                     read_reply(slow, 5) == (0, b""))
        logged = {
            "header": d.wait_log(f"{HEADER_LOG}", 5) and d.wait_log(f"{HEADER_SENT} of 28 bytes came", 5),
            "big": d.wait_log(f"4096 of {MIB} bytes came; that WRITE is dropped unanswered", 5),
            "small": d.wait_log(f"4096 of {SMALL} bytes came; that WRITE is dropped unanswered", 5),
            "refused": d.wait_log(f"4096 of {MIB} bytes came (its error was answered)", 5),
            "reader": d.wait_log(READER_LOG, 5),
        }
        elapsed = time.monotonic() - start
        checks.check("the TLS client stalled half-way through a request header is closed",
                     logged["header"] and closed_by_server(half_header, 5), d.log_tail(8))
        checks.check("the TLS client stalled in a 1 MiB WRITE payload is closed",
                     logged["big"] and closed_by_server(big, 5), d.log_tail(8))
        checks.check("the TLS client stalled in a 32 KiB WRITE payload is closed",
                     logged["small"] and closed_by_server(small, 5), d.log_tail(8))
        checks.check("the TLS client stalled in a refused WRITE's payload is closed",
                     logged["refused"] and closed_by_server(refused, 5), d.log_tail(8))
        checks.check("the TLS client that does not read its replies is closed",
                     logged["reader"] and closed_by_server(reader, 5), d.log_tail(8))
        checks.check("all within a few seconds of the 1 s timeout", elapsed < 7, f"{elapsed:.1f} s")
        checks.check("the closes name the timeout", "limits.stall_timeout 1s" in d.log(), d.log_tail(8))
        deadline = time.monotonic() + 5
        while (in_flight := Daemon.device(d.stats(), "d0")["counters"]["in_flight"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        checks.check("the device holds no request of the closed TLS clients", in_flight == 0,
                     f"in_flight {in_flight}")
        live_client_works(sock, ca.cert, 4096, checks, "after the stalled ones were closed")
        checks.check("the slow TLS writer's connection stays open", not closed_by_server(slow, 0.2))
    finally:
        for s in stalled:
            s.close()
        checks.clean_up(d, tmp)
    checks.finish()


if __name__ == "__main__":
    main()
