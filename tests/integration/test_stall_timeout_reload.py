"""limits.stall_timeout set by a reload times the stalls already under way
at the reload, not only those that begin afterwards.

With stall_timeout 0 a stall is never timed: a small WRITE payload, a
request header or a refused WRITE's payload starts no timer at all, and
the one check an in-place WRITE payload (or a reply batch) gets, at its
100 ms step, sees 0 and stops. A reload that then set a timeout left those
stalls untimed until the client moved a byte: a client that stayed silent
kept its connection, buffers and share of the in-flight budget for ever.

One daemon on a RAM export with stall_timeout 0: a writer stalled in a
1 MiB WRITE (received in place), one stalled in a 32 KiB WRITE (through
the read buffer), one stalled half-way through a request header, one
half-way through a refused WRITE's payload, and a reader that does not read
64 MiB of replies; an idle client has nothing in flight. After 0.5 s (the
100 ms steps have run while the timeout was 0) a reload sets stall_timeout:
1s, and none of the stalled clients sends or reads another byte. Each is
closed with its log line within a few seconds, none before 1 s after the
reload; the idle one stays open and its WRITE and READ are answered."""
import struct
import sys
import time

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for
from nbdsched_test.raw_nbd import CMD_WRITE, REQUEST_MAGIC, closed_by_server, connect_export, write_then_read
from nbdsched_test.verdict import Checks
from test_stall_timeout import (CONFIG, HEADER_LOG, MIB, READER_LOG, REFUSED_LOG, WRITER_LOG, stalled_header,
                                stalled_reader, stalled_refused)

SENT = 4096


def stalled_write(path, length, cookie):
    """A connection stalled after SENT bytes of the payload of a WRITE of `length`."""
    s = connect_export(path)
    s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, cookie, cookie * MIB, length) + b"w" * SENT)
    return s


def main():
    checks = Checks()
    with Daemon(CONFIG, "stall_timeout_reload") as d:
        big, small = stalled_write(d.sock, MIB, 4), stalled_write(d.sock, 32 << 10, 5)
        header, refused, reader = stalled_header(d.sock), stalled_refused(d.sock), stalled_reader(d.sock)
        idle = connect_export(d.sock)
        time.sleep(0.5)
        d.write_config("limits: {stall_timeout: 1s}\n" + CONFIG)
        d.hup()
        checks.check("the reload setting stall_timeout is applied", d.wait_log("reload: limits.stall_timeout = 1s", 10),
                     d.log_tail(5))
        reloaded = time.monotonic()
        time.sleep(0.5)
        checks.check("0.5 s after the reload no stalled client is closed yet",
                     not any(log in d.log() for log in (WRITER_LOG, READER_LOG, HEADER_LOG, REFUSED_LOG)),
                     d.log_tail(5))
        both_writers = wait_for(lambda: d.log().count(WRITER_LOG) >= 2, 6)
        logged = {log: d.wait_log(log, 1) for log in (READER_LOG, HEADER_LOG, REFUSED_LOG)}
        elapsed = time.monotonic() - reloaded
        log = d.log()
        checks.check("a writer silent in an in-place 1 MiB payload since before the reload is closed",
                     f"{SENT} of {MIB} bytes came" in log and closed_by_server(big, 5), d.log_tail(10))
        checks.check("a writer silent in a 32 KiB payload since before the reload is closed",
                     both_writers and f"{SENT} of {32 << 10} bytes came" in log and closed_by_server(small, 5),
                     d.log_tail(10))
        checks.check("a client silent half-way through a header since before the reload is closed",
                     logged[HEADER_LOG] and closed_by_server(header, 5), d.log_tail(10))
        checks.check("a client silent in a refused WRITE's payload since before the reload is closed",
                     logged[REFUSED_LOG] and closed_by_server(refused, 5), d.log_tail(10))
        checks.check("a reader that has read nothing since before the reload is closed",
                     logged[READER_LOG] and closed_by_server(reader, 5), d.log_tail(10))
        checks.check("all within a few seconds of the reload", elapsed < 6, f"{elapsed:.1f} s")
        checks.check("the idle client is not closed, its WRITE and READ are answered", write_then_read(idle, 200 * MIB))
        checks.check("the device holds no request of the closed clients",
                     wait_for(lambda: Daemon.device(d.stats(), "d0")["counters"]["in_flight"] == 0, 5))
        for s in (big, small, header, refused, reader, idle):
            s.close()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
