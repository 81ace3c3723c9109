"""A reload that lowers limits.stall_timeout applies it to the stalls
already timed, from the start of their wait, at once: each stall's timer
was armed for the old timeout, and used to read the new value only when
that ran out (here 60 s later).

One daemon on a RAM export with stall_timeout 60s: a writer stalled in a
1 MiB WRITE's payload, a reader that does not read 64 MiB of replies, a
client stalled half-way through a request header and one in a refused
WRITE's payload. 1.5 s later (past every stall's 100 ms step, all four
timed for 60 s) a fifth client stops half-way through a header, and a
reload sets stall_timeout: 1s. The four that waited longer than 1 s are
closed within a few seconds of the reload, each with its log line; the
fifth, which had waited less, is still open 0.2 s after the reload and
closed about 1 s after its stall began; an idle client is served."""
import sys
import time

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for
from nbdsched_test.raw_nbd import closed_by_server, connect_export, write_then_read
from nbdsched_test.verdict import Checks
from test_stall_timeout import (CONFIG, HEADER_LOG, LOGS, MIB, READER_LOG, REFUSED_LOG, WRITER_LOG, stalled_header,
                                stalled_reader, stalled_refused, stalled_writer)


def main():
    checks = Checks()
    with Daemon("limits: {stall_timeout: 60s}\n" + CONFIG, "stall_timeout_lowered") as d:
        writer, reader = stalled_writer(d.sock), stalled_reader(d.sock)
        header, refused = stalled_header(d.sock), stalled_refused(d.sock)
        idle = connect_export(d.sock)
        time.sleep(1.5)
        checks.check("with stall_timeout 60s no stalled client is closed after 1.5 s",
                     not any(log in d.log() for log in LOGS), d.log_tail(5))
        late = stalled_header(d.sock)
        d.write_config("limits: {stall_timeout: 1s}\n" + CONFIG)
        d.hup()
        checks.check("the reload lowering stall_timeout is applied",
                     d.wait_log("reload: limits.stall_timeout = 1s", 10), d.log_tail(5))
        reloaded = time.monotonic()
        time.sleep(0.2)
        checks.check("the client stalled just before the reload is still open 0.2 s after it",
                     d.log().count(HEADER_LOG) <= 1, d.log_tail(5))
        logged = {log: d.wait_log(log, 5) for log in (WRITER_LOG, READER_LOG, REFUSED_LOG)}
        first = time.monotonic() - reloaded
        checks.check("a writer stalled in its payload for longer than the new timeout is closed",
                     logged[WRITER_LOG] and closed_by_server(writer, 5), d.log_tail(10))
        checks.check("a reader stalled for longer than the new timeout is closed",
                     logged[READER_LOG] and closed_by_server(reader, 5), d.log_tail(10))
        checks.check("a client stalled in a refused WRITE's payload for longer than the new timeout is closed",
                     logged[REFUSED_LOG] and closed_by_server(refused, 5), d.log_tail(10))
        checks.check("a client stalled in a header for longer than the new timeout is closed",
                     closed_by_server(header, 5), d.log_tail(10))
        checks.check("those four within a few seconds of the reload, not the old 60 s", first < 4, f"{first:.1f} s")
        both = wait_for(lambda: d.log().count(HEADER_LOG) >= 2, 5)
        late_after = time.monotonic() - reloaded
        checks.check("the client stalled just before the reload is closed about 1 s after its stall began",
                     both and closed_by_server(late, 5) and late_after < 4, f"{late_after:.1f} s after the reload")
        checks.check("the idle client is not closed, its WRITE and READ are answered", write_then_read(idle, 200 * MIB))
        for s in (writer, reader, header, refused, late, idle):
            s.close()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
