"""ctl list/get/set/weight/stats against a libnbd client whose requests we count.

The request counts in `ctl stats --json` must match exactly what the client
did, per device, export, group and queue; `set` changes a tunable at run time
and `get` reads it back; `weight` re-weights a group.
"""
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import check

CONFIG = """
devices:
  - {name: d0, backend: ram, size: 64MiB, scheduler: cfq, read_ahead_kb: 128}
exports:
  - {name: a, device: d0, size: 32MiB, group: gold}
  - {name: b, device: d0, offset: 32MiB}
groups:
  - {name: gold, weight: 1000}
  - {name: bronze, weight: 100}
"""


REASONS = ["too_idle", "budget_timeout", "budget_exhausted", "no_more_requests", "preempted", "seeky_turn_ended",
           "slice_used", "closed"]


def check_expirations(dev, queue):
    """Why cfq's slices ended, per reason, at every level; gold's one client
    is the only one, so its queue, gold and the device agree, and no more
    slices ended than started. Its queue has its idle window flag."""
    def ended(sched):
        return {r: sched["expired_" + r] for r in REASONS}
    gold_stats = next(g for g in dev["groups"] if g["name"] == "gold")
    device, gold, own = ended(dev["sched"]), ended(gold_stats["sched"]), ended(queue["sched"])
    check(device == gold and sum(device.values()) <= dev["sched"]["slices"],
          f"expirations: device {device} = group gold's, at most its {dev['sched']['slices']} slices")
    check(all(own[r] <= gold[r] for r in REASONS), f"the queue's {own} within gold's")
    check(device["budget_timeout"] == 0, "cfq has no budget timeouts")
    check(isinstance(queue["sched"].get("idle_window"), bool) and "io_bound" not in queue["sched"],
          f"a cfq queue shows its idle window: {queue['sched']}")


def main():
    with Daemon(CONFIG, "stats") as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("a"))
        buf = bytearray(8192)
        for i in range(23):
            h.pwrite(buf, i * 8192)
        for i in range(37):
            h.pread(4096, i * 4096)
        for _ in range(3):
            h.flush()
        for i in range(5):
            h.trim(4096, i * 65536)
        for i in range(4):
            h.zero(4096, (1 << 20) + i * 4096)

        s = d.stats()
        dev = d.device(s, "d0")
        c = dev["counters"]
        check((c["reads"], c["writes"], c["flushes"], c["trims"], c["zeroes"]) == (37, 23, 3, 5, 4),
              f"device counts exact: {c}")
        check(c["read_bytes"] == 37 * 4096 and c["write_bytes"] == 23 * 8192, "bytes exact")
        check(c["in_flight"] == 0 and c["errors"] == 0, "nothing in flight, no errors")
        check(c["latency_p99_us"] >= c["latency_p50_us"] > 0, "latency percentiles")
        exp = next(e for e in dev["exports"] if e["name"] == "a")
        check(exp["requests"] == 72, "export a has all 72 requests")
        gold = d.group(dev, "gold")
        check(gold["counters"]["requests"] == 72 and gold["weight"] == 1000, "group gold has them")
        check(gold["sched"]["dispatched"] > 0, "the scheduler dispatched for gold (read-ahead may serve some)")
        check(d.group(dev, "bronze")["counters"]["requests"] == 0, "bronze has none")
        # The 37 sequential reads stream through read-ahead (set to 128 KiB:
        # `auto` is off on RAM): its hits are counted where the reads were.
        hits = c["readahead_hits"]
        check(0 < hits <= 37, f"read-ahead served some of the reads ({hits})")
        check(gold["counters"]["readahead_hits"] == hits and exp["readahead_hits"] == hits,
              "read-ahead hits per group and export add up to the device's")
        check(d.group(dev, "bronze")["counters"]["readahead_hits"] == 0, "bronze has no read-ahead hits")
        q = dev["queues"]
        check(len(q) == 1 and q[0]["export"] == "a" and q[0]["group"] == "gold", f"one queue: {q}")
        check("pid" in q[0]["peer"], "the queue's peer carries its pid")
        check(q[0]["counters"]["requests"] == 72, "the queue has them too")
        check(q[0]["counters"]["readahead_hits"] == hits, "and its read-ahead hits")

        check_expirations(dev, q[0])

        table = d.ctl("stats")
        check("group gold w1000" in table and "device" in table, "human stats table")
        check("turns ended" in table and "slice_used" in table and "idle_window" in table,
              "human stats: why turns ended, and the queue's idle window")
        listing = d.ctl("list")
        check("export" in listing and "gold" in listing, "human list")
        check("tunables: slice_idle=" in listing, "human list shows the tunables")
        check(d.listing()["devices"][0]["tunables"]["quantum"] == "8", "list JSON has each tunable's value")

        before = d.ctl("get", "d0", "slice_idle").strip()
        out = d.ctl("set", "d0", "slice_idle", "3ms").strip()
        after = d.ctl("get", "d0", "slice_idle").strip()
        check(after == out and after != before, f"set slice_idle: {before} -> {after}")
        check(d.ctl("set", "d0", "slice_idle", "0").strip() == d.ctl("get", "d0", "slice_idle").strip(),
              "set slice_idle 0")
        err = d.ctl("get", "d0", "no_such", expect=1)
        check("slice_idle" in err, f"unknown tunable lists the names: {err.strip()}")
        err = d.ctl("set", "d0", "slice_idle", "banana", expect=1)
        check("slice_idle" in err, f"bad value refused: {err.strip()}")
        err = d.ctl("get", "nope", "slice_idle", expect=1)
        check("no device" in err, "unknown device")
        d.ctl("weight", "bronze", "300")
        check(next(g for g in d.listing()["groups"] if g["name"] == "bronze")["weight"] == 300, "weight 300")
        d.ctl("weight", "nope", "3", expect=1)
        d.ctl("weight", "bronze", "5000", expect=1)   # out of range: refused, as the daemon refuses iops=0
        h.shutdown()
        del h

        # a closed queue leaves the queue list, its counts stay in export and group
        s = d.stats()
        dev = d.device(s, "d0")
        check(dev["queues"] == [] and d.group(dev, "gold")["counters"]["requests"] == 72, "closed queue")
    return 0


if __name__ == "__main__":
    sys.exit(main())
