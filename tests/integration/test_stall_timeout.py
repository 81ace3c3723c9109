"""limits.stall_timeout: a client that stops sending a request it began (a
WRITE payload, a request header, a refused WRITE's payload), or stops
reading its replies, is closed once it has been stalled that long; other
clients go on, and what the stalled ones held is let go. With the default
(0) nothing is closed.

One daemon on a RAM export, first with no stall_timeout: a stalled writer
(the header and 4 KiB of a 1 MiB WRITE), a reader that never reads (64
READs of 1 MiB), a client that sent 10 bytes of a READ's header and one
that sent the header and 4 KiB of a 1 MiB WRITE past the export's end
(answered with an error at once, its payload read to be dropped) are still
served 2.5 s later: the writer sends the rest and is answered, the reader
reads every reply, the other two send the rest and then a READ, answered. A
reload sets stall_timeout: 1s (it applies live) and the same four stalls
begin again: each is closed 1 s or more after its client's last move
began and within a few seconds of its end, with a log line naming the
export and what the client stalled on, the device holds no request of
theirs any more, and another client's WRITE and READ are answered
meanwhile and after.

A writer and a reader stalled since before the reload (their stall checked
while the timeout was 0) move a little after it (4 KiB more of the payload,
16 MiB of replies read) and stall again: that new stall is timed too, and
both are closed likewise.

When each connection closed is seen by a thread that polls them all
(HangupWatch), so the test need not look at a set moment: on a loaded
machine the test itself may be descheduled for longer than the timeout
(the 16 MiB read took seconds), and a check made "at 0.5 s" then came
after the closes. The daemon never closes a stall early, however late it
may be: the lower bound holds under any load."""
import socket
import struct
import sys
import time

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for
from nbdsched_test.raw_nbd import (CMD_READ, CMD_WRITE, REQUEST_MAGIC, HangupWatch, connect_export, read_reply,
                                   write_then_read)
from nbdsched_test.verdict import Checks

MIB = 1 << 20
TIMEOUT = 1   # s: limits.stall_timeout once the reload sets it
# s from the end of a stall's last move to its close as seen here: the
# timeout, and room for a loaded machine to be late (never early).
LATE = 5
READS = 64
CONFIG = """devices:
  - {name: d0, size: 256MiB}
exports:
  - {name: default, device: d0}
"""
WRITER_LOG = "export 'default': the client has not sent the rest of a WRITE payload for"
READER_LOG = "export 'default': the client has not read its replies for"
HEADER_LOG = "export 'default': the client has not sent the rest of a request header for"
REFUSED_LOG = "export 'default': the client has not sent the rest of a refused WRITE's payload for"
LOGS = (WRITER_LOG, READER_LOG, HEADER_LOG, REFUSED_LOG)
HEADER_SENT = 10
# More than 3/4 of the daemon's send buffer (2 MiB: widen_send_buffer), so
# that the socket has room again and the daemon sends more.
CARRIED_READ = 16 * MIB


def stalled_writer(path):
    """A connection stalled in the payload of a 1 MiB WRITE at 0."""
    s = connect_export(path)
    s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, 1, 0, MIB) + b"w" * 4096)
    return s


def stalled_reader(path):
    """A connection whose READ replies (64 MiB) fill its socket: never read."""
    s = connect_export(path)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(b"".join(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, i, i * MIB, MIB) for i in range(READS)))
    return s


def stalled_header(path):
    """A connection stalled after 10 bytes of a READ's header (cookie 2)."""
    s = connect_export(path)
    s.sendall(read_header()[:HEADER_SENT])
    return s


def read_header():
    return struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, 2, 0, 4096)


def stalled_refused(path):
    """A connection stalled in the payload of a 1 MiB WRITE past the export's
    end (cookie 3): its error is answered at once, the payload read to be dropped."""
    s = connect_export(path)
    s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, 3, 256 * MIB, MIB) + b"r" * 4096)
    error, _ = read_reply(s, 3)
    if error == 0:
        raise AssertionError("a WRITE past the export's end was answered without an error")
    return s


def timed(move, *args):
    """move(*args)'s result, and time.monotonic() before and after it."""
    since = time.monotonic()
    result = move(*args)
    return result, since, time.monotonic()


def read_some(s, n):
    """Reads up to `n` bytes (what comes within 5 s); how many came."""
    s.settimeout(5)
    got = 0
    try:
        while got < n:
            chunk = s.recv(min(n - got, 1 << 16))
            if not chunk:
                break
            got += len(chunk)
    except socket.timeout:
        pass
    return got


def live_client_works(path, offset, checks, when):
    s = connect_export(path)
    ok = write_then_read(s, 200 * MIB + offset)
    s.close()
    checks.check(f"another client's WRITE and READ are answered {when}", ok)


def main():
    checks = Checks()
    with Daemon(CONFIG, "stall_timeout") as d:
        # Off: stalls are waited out however long they last.
        writer, reader = stalled_writer(d.sock), stalled_reader(d.sock)
        carried_writer, carried_reader = stalled_writer(d.sock), stalled_reader(d.sock)
        header, refused = stalled_header(d.sock), stalled_refused(d.sock)
        time.sleep(2.5)
        writer.sendall(b"w" * (MIB - 4096))
        checks.check("stall_timeout 0: a writer stalled 2.5 s is still served: its WRITE is answered",
                     read_reply(writer, 1) == (0, b""))
        got = sum(1 for i in range(READS) if read_reply(reader, i, MIB)[0] == 0)
        checks.check("stall_timeout 0: a reader that read nothing for 2.5 s gets all its replies", got == READS,
                     f"{got} of {READS}")
        header.sendall(read_header()[HEADER_SENT:])
        checks.check("stall_timeout 0: a header stalled 2.5 s is still served: its READ is answered",
                     read_reply(header, 2, 4096)[0] == 0)
        refused.sendall(b"r" * (MIB - 4096) + read_header())
        checks.check("stall_timeout 0: a refused WRITE's payload stalled 2.5 s is still read: the next READ is answered",
                     read_reply(refused, 2, 4096)[0] == 0)
        for s in (writer, reader, header, refused):
            s.close()
        checks.check("stall_timeout 0: no connection closed for a stall", not any(log in d.log() for log in LOGS))

        # A reload sets it; stalls that begin afterwards are timed (those under
        # way too: test_stall_timeout_reload.py).
        d.write_config(f"limits: {{stall_timeout: {TIMEOUT}s}}\n" + CONFIG)
        d.hup()
        checks.check("the reload setting stall_timeout is applied", d.wait_log("reload: limits.stall_timeout = 1s", 10),
                     d.log_tail(5))
        # Each stall began after its client's last move began (`since`: the
        # daemon cannot time it sooner) and about when that move ended
        # (`until`); the daemon closes it no sooner than TIMEOUT after.
        stalls, watch = {}, HangupWatch()
        for name, make in (("the stalled writer", stalled_writer), ("the reader that does not read", stalled_reader),
                           ("the client stalled half-way through a request header", stalled_header),
                           ("the client stalled half-way through a refused WRITE's payload", stalled_refused)):
            stalls[name] = timed(make, d.sock)
            watch.watch(stalls[name][0])
        # The stalls carried over the reload move, and stall again.
        watch.watch(carried_writer)
        _, since, until = timed(carried_writer.sendall, b"w" * 4096)
        stalls["a writer stalled since before the reload, once it stalls again after it"] = carried_writer, since, until
        watch.watch(carried_reader)
        carried_read, since, until = timed(read_some, carried_reader, CARRIED_READ)
        stalls["a reader stalled since before the reload, once it stalls again after it"] = carried_reader, since, until
        live_client_works(d.sock, 0, checks, "while clients are stalled")
        names = list(stalls)   # in the order watched
        closed = dict(zip(names, watch.times(10)))
        for name in names:
            sock, since, until = stalls[name]
            at = closed[name]
            checks.check(f"{name} is closed, no sooner than {TIMEOUT} s into its stall and within a few seconds",
                         at is not None and at - since >= TIMEOUT and at - until < LATE,
                         "still open" if at is None else f"{at - since:.2f} s after its last move began, "
                         f"{at - until:.2f} s after it ended")
        checks.check("the carried reader read what it was sent after the reload", carried_read == CARRIED_READ,
                     f"read {carried_read} bytes")
        # Each close for the reason the test meant.
        for log in LOGS:
            checks.check(f"logged: {log}", d.wait_log(log, 5))
        checks.check("the carried writer's close says how much of its payload came",
                     d.wait_log(f"8192 of {MIB} bytes came", 5), d.log_tail(8))
        checks.check("the carried reader's close is logged", wait_for(lambda: d.log().count(READER_LOG) >= 2, 5),
                     d.log_tail(8))
        log = d.log()
        checks.check("the writer's close is logged with the export and how long (1s)",
                     WRITER_LOG in log and "limits.stall_timeout 1s" in log and "dropped unanswered" in log,
                     d.log_tail(8))
        checks.check("the reader's close is logged with the export", READER_LOG in log, d.log_tail(8))
        checks.check("the header's close says how much of it came",
                     f"{HEADER_SENT} of 28 bytes came" in log, d.log_tail(8))
        checks.check("the refused WRITE's close says how much of its payload came",
                     f"4096 of {MIB} bytes came (its error was answered)" in log, d.log_tail(8))
        deadline = time.monotonic() + 5
        while (in_flight := Daemon.device(d.stats(), "d0")["counters"]["in_flight"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        checks.check("the device holds no request of the closed clients", in_flight == 0, f"in_flight {in_flight}")
        live_client_works(d.sock, 4096, checks, "after the stalled clients were closed")
        for sock, _, _ in stalls.values():
            sock.close()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
