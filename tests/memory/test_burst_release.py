"""What a burst leaves behind: four clients queue 64 reads of 1 MiB each on
a file export, then go quiet. The burst raises the daemon's resident set
(VmRSS) by hundreds of MiB of request buffers; once its event loop has taken
no buffer for a while (5-10 s) the daemon frees what its buffer pool keeps
and hands glibc's free memory back, so the resident set falls to within
16 MiB of where it was before the burst. The clients stay connected, as a
kernel client would. Read-ahead is off: its cache is memory kept on purpose.
"""
import time

from nbdsched_test import fio
from nbdsched_test.daemon import Daemon
from nbdsched_test.process import rss_bytes
from nbdsched_test.verdict import check

GROWTH_NEEDED = 64 << 20   # a burst that raised RSS less shows nothing
BOUND = 16 << 20
WAIT_S = 30

CONFIG = """
devices:
  - {name: f, backend: file, path: "{dir}/f.img", size: 256MiB, read_ahead_kb: 0}
exports:
  - {name: f, device: f}
# Two event loops: clients on loop 1 take their buffers from that thread's
# own glibc arena, whose top malloc_trim() does not return.
limits: {threads: 2}
log_level: warn
"""


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def main():
    fio.require_nbd_engine()
    with Daemon(CONFIG, tag="burst") as d:
        uri = f"nbd+unix:///f?socket={d.sock}"
        quiet = {"ioengine": "nbd", "uri": uri, "rw": "read", "bs": "1m", "iodepth": 64, "numjobs": 4,
                 "time_based": True, "eta": "never"}
        # The clients stay: a long quiet job holds each connection open.
        # One process (--thread): killing it at the end leaves no job behind.
        with fio.Running({**quiet, "runtime": 3600, "rate_iops": 1, "numjobs": 1, "thread": True}, [("idle", {})]):
            time.sleep(1)
            before = rss_bytes(d.pid)
            fio.run({**quiet, "runtime": 3}, [("burst", {})], timeout=120)
            peak = rss_bytes(d.pid)
            print(f"before {mib(before)}, after the burst {mib(peak)}")
            check(peak - before >= GROWTH_NEEDED,
                  f"the burst raised RSS by at least {mib(GROWTH_NEEDED)} ({mib(peak - before)})")
            deadline = time.monotonic() + WAIT_S
            now = peak
            while time.monotonic() < deadline:
                time.sleep(0.5)
                now = rss_bytes(d.pid)
                if now - before <= BOUND:
                    break
            waited = WAIT_S - (deadline - time.monotonic())
            check(now - before <= BOUND,
                  f"{waited:.1f} s after the burst RSS is within {mib(BOUND)} of before ({mib(now)}, "
                  f"{mib(now - before)} above)")


if __name__ == "__main__":
    main()
