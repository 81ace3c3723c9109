"""A TRIM or WRITE_ZEROES costs a byte limit one sector, as blk-throttle
charges a discard (docs/qos.md, Limit): under `limit: {bps: 1MiB}` a 32 MiB
trim, then a 32 MiB write-zeroes, each followed by a 4 KiB read. Charged
their whole range, each read waited 32 s for the debt; now it is answered
at once (bound: 5 s, a loose one for a loaded host). A read still held at
the bound is released by removing the limit, so the test ends either way.
The data a write-zeroes clears reads back as zeroes."""
import sys
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

MiB = 1 << 20
BOUND_S = 5.0

CONFIG = """devices:
  - {name: d0, backend: ram, size: 128MiB, scheduler: cfq}
exports:
  - {name: e, device: d0, group: g}
groups:
  - {name: g, limit: {bps: 1MiB}}
"""


def timed_read(h, d):
    """Seconds a 4 KiB read took, or None when it was still waiting after
    BOUND_S (then the limit is removed and put back once it is answered)."""
    buf = nbd.Buffer(4096)
    start = time.monotonic()
    cookie = h.aio_pread(buf, 64 * MiB)
    while not h.aio_command_completed(cookie):
        if time.monotonic() - start > BOUND_S:
            d.ctl("limit", "g", "off")
            while not h.aio_command_completed(cookie):
                h.poll(1000)
            d.ctl("limit", "g", "bps=1MiB")
            return None
        h.poll(100)
    return time.monotonic() - start


def main():
    checks = Checks()
    with Daemon(CONFIG, "qos_trim") as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("e"))
        h.pwrite(b"\x5a" * 4096, 40 * MiB)
        for what, op in (("trim", lambda: h.trim(32 * MiB, 0)), ("write-zeroes", lambda: h.zero(32 * MiB, 32 * MiB))):
            start = time.monotonic()
            op()
            took = time.monotonic() - start
            checks.check(f"a 32 MiB {what} under bps=1MiB answered within {BOUND_S:.0f} s", took < BOUND_S,
                         f"{took:.3f} s")
            read = timed_read(h, d)
            checks.check(f"the 4 KiB read after it answered within {BOUND_S:.0f} s, not after 32 s of debt",
                         read is not None, "still waiting" if read is None else f"{read:.3f} s")
        checks.check("the write-zeroes cleared its range", h.pread(4096, 40 * MiB) == bytes(4096))
        h.shutdown()
        q = next(g for g in d.listing()["groups"] if g["name"] == "g")["qos"]
        checks.check("the limit is still in force", q["limit"]["bps"] == MiB, str(q))
        if checks.failed:
            d.print_log_tail()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
