"""`ctl set slice_idle 0` mid-run changes what the scheduler does.

Two fio jobs read sequentially (iodepth 1, each its own connection, so its
own cfq queue) from two distant regions of one `hdd`-profile device. With
the rotational default slice_idle (8 ms) cfq idles after each request of the
queue in service, waiting for that reader's next one, so the emulated head
stays in one region for a whole slice. Halfway through the same fio run,
`ctl set d0 slice_idle 0`: cfq stops waiting, switches reader after almost
every request and the disk seeks each time -- throughput collapses (seed
005's "why idle on disks", here switched live). Any idle time left is group
idling (group_idle stays 8 ms) in the instants when only one reader is busy,
cut short when the other one's request arrives.
Read-ahead is off so that every read reaches the scheduler.
"""
import sys
import time

from nbdsched_test import fio
from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import check

CONFIG = """
devices:
  - {name: d0, backend: ram, size: 256MiB, scheduler: cfq, profile: hdd, read_ahead_kb: 0}
exports:
  - {name: a, device: d0, size: 128MiB}
  - {name: b, device: d0, offset: 128MiB}
"""
RUNTIME = 8   # seconds; slice_idle is switched off at RUNTIME / 2


def sample(d):
    """(seconds, MiB read so far, ms idled so far) on device d0."""
    dev = d.device(d.stats(), "d0")
    return time.monotonic(), dev["counters"]["read_bytes"] / 2**20, dev["sched"]["idle_ms"]


def rates(first, last):
    """(MiB/s, idle ms per s) between two samples."""
    dt = last[0] - first[0]
    return (last[1] - first[1]) / dt, (last[2] - first[2]) / dt


def main():
    fio.require_installed()
    with Daemon(CONFIG, "live") as d:
        check(d.ctl("get", "d0", "slice_idle").strip() not in ("0", "0ms", "0ns"),
              "rotational device: slice_idle defaults to non-zero")
        with fio.start({"ioengine": "nbd", "thread": True, "time_based": True, "runtime": RUNTIME,
                        "rw": "read", "bs": "64k", "iodepth": 1, "eta": "never"},
                       [(x, {"uri": d.uri(x)}) for x in ("a", "b")]) as readers:
            time.sleep(1.0)                      # both queues are busy
            a = sample(d)
            time.sleep(RUNTIME / 2 - 1.0)
            b = sample(d)
            d.ctl("set", "d0", "slice_idle", "0")
            time.sleep(0.5)                      # an idle wait armed before the change ends
            c = sample(d)
            time.sleep(RUNTIME / 2 - 1.5)
            e = sample(d)
            result = readers.finish(timeout=60)  # raises if fio failed
        check(result.summary(rw="read")["ios"] > 0, "fio ran")
        (bw_on, idle_on), (bw_off, idle_off) = rates(a, b), rates(c, e)
        print(f"slice_idle 8ms: {bw_on:.1f} MiB/s, idling {idle_on:.0f} ms/s; "
              f"after `ctl set d0 slice_idle 0`: {bw_off:.1f} MiB/s, idling {idle_off:.0f} ms/s")
        check(idle_on > 10.0, f"slice_idle 8ms: cfq idles ({idle_on:.0f} ms/s)")
        check(d.ctl("get", "d0", "slice_idle").strip() in ("0", "0ms", "0ns"), "the new value reads back")
        check(bw_on > 2 * bw_off,
              f"slice_idle 0 mid-run: the readers' interleaving seeks cut throughput "
              f"({bw_on:.1f} -> {bw_off:.1f} MiB/s, expected at least halved)")
        check(d.device(d.stats(), "d0")["counters"]["errors"] == 0, "no errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
