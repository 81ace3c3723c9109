"""What the event loop does when it runs out of work: limits.busy_poll
(poll before sleeping) and limits.coalesce (nap first, then serve what came
meanwhile in one batch). With either on, data still round-trips over Unix
and TCP (small replies copied, large RAM replies sent from the backend's
pages, several in flight at once, a TRIM racing a large read), and the
daemon reports the loop's polls and naps at exit. With `auto`, a client
that sends a request every 2 ms (none arrives within a poll's 50 us) makes
the loop stop polling, and never makes it try a nap (a 50 us nap would
gather a fortieth of a request). No speed is asserted: whether a poll
found work, or a nap paid, depends on timing.
"""
import re
import sys
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check

CONFIG = """
devices:
  - {name: d0, backend: ram, size: 64MiB}
exports:
  - {name: a, device: d0}
limits: {busy_poll: POLL, coalesce: NAP}
log_level: info
"""
MIB = 1 << 20


def pattern(n, seed):
    block = bytes((i * 7 + seed) & 0xFF for i in range(4093))   # a prime length: no page repeats
    return (block * (n // len(block) + 1))[:n]


def exercise(h, base, seed):
    data = pattern(5 * MIB, seed)
    h.pwrite(data, base + 1000)
    check(h.pread(4096, base + 1000) == data[:4096], "a 4 KiB read (copied) reads back")
    check(h.pread(3 * MIB + 5, base + 1000) == data[:3 * MIB + 5], "a 3 MiB read (from pinned pages) reads back")
    # Eight 512 KiB reads in flight at once, answered in one batch or several.
    bufs = [nbd.Buffer(512 << 10) for _ in range(8)]
    for i, b in enumerate(bufs):
        h.aio_pread(b, base + 1000 + i * (512 << 10))
    while h.aio_in_flight() > 0:
        h.poll(-1)
    got = b"".join(bytes(b.to_bytearray()) for b in bufs)
    check(got == data[:4 * MIB], "8 concurrent 512 KiB reads read back")
    # A read above a hole: the zeros come from the shared zero block.
    check(h.pread(2 * MIB, base + 6 * MIB) == bytes(2 * MIB), "a never-written range reads as zeros")
    # A TRIM racing a large read of the same range: either data is allowed
    # in the reply; afterwards the range reads as zeros.
    b = nbd.Buffer(2 * MIB)
    h.aio_pread(b, base + MIB)
    h.aio_trim(2 * MIB, base + MIB)
    while h.aio_in_flight() > 0:
        h.poll(-1)
    check(h.pread(2 * MIB, base + MIB) == bytes(2 * MIB), "the trimmed range reads as zeros")
    check(h.pread(1000, base) == bytes(1000), "the bytes before the write are untouched")


def run(poll, nap="0"):
    config = CONFIG.replace("POLL", poll).replace("NAP", nap)
    with TempDir("poll") as tmp, Daemon(config, "poll", workdir=tmp, tcp=True, control=False) as d:
        for i, transport in enumerate(("unix", "tcp")):
            h = nbd.NBD()
            h.connect_uri(d.uri("a", transport))
            exercise(h, i * 16 * MIB, seed=i + 1)
            h.shutdown()
        if "auto" in (poll, nap):
            h = nbd.NBD()
            h.connect_uri(d.uri("a", "unix"))
            for i in range(200):   # a trickle: each poll runs out before the next request
                h.pread(4096, i * 4096)
                time.sleep(0.002)
            h.shutdown()
        d.stop()
        return d.log()


def main():
    log = run("200us")
    m = re.search(r"event loop: busy_poll 200us: (\d+) sleeps avoided, (\d+) sleeps( \(\d+ loops\))?\n", log)
    check(m is not None, "the daemon reports its busy polling at exit")
    check(m is not None and int(m.group(2)) >= 1, "it slept at least once (idle before the first client)")
    log = run("auto")
    m = re.search(r"event loop: busy_poll auto 50us: (\d+) sleeps avoided, (\d+) sleeps, "
                  r"stopped polling (\d+) times", log)
    check(m is not None, "auto reports its polling and how often it stopped at exit")
    check(m is not None and int(m.group(3)) >= 1,
          "auto stopped polling under a trickle of requests 2 ms apart (polls that found nothing)")
    log = run("0", nap="200us")
    m = re.search(r"event loop: coalesce 200us: (\d+) naps\n", log)
    check(m is not None, "the daemon reports its naps at exit")
    check(m is not None and int(m.group(1)) >= 1, "the loop napped (after each burst of work)")
    log = run("auto", nap="auto")
    m = re.search(r"event loop: coalesce auto 50us: (\d+) naps, tried (\d+) times, kept (\d+), "
                  r"lengthened (\d+)\n", log)
    check(m is not None, "auto reports its naps and trials at exit")
    check(m is not None and int(m.group(2)) == 0 and int(m.group(1)) == 0,
          "auto never tried napping for a trickle of requests 2 ms apart")
    print("PASS")


if __name__ == "__main__":
    sys.exit(main())
