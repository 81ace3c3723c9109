"""Experiment 7, scheduler cost: requests per second and daemon CPU per
request with 1, 100 and 1000 connections (each a scheduler queue) on one RAM
device without emulation, `none` vs `cfq` vs `bfq`. Every connection is one
fio job (thread) doing 4k random reads at iodepth 8."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import common  # noqa: E402
import fio  # noqa: E402
import report  # noqa: E402
import servers  # noqa: E402

NAME = "exp7-sched-cost"
SCHEDS = ["none", "cfq", "bfq"]


def main():
    a = common.args(__doc__)
    runtime, counts = (1, [1, 20]) if a.quick else (5, [1, 100, 1000])
    facts = report.Facts()
    devices = [common.ram_device(f"ram-{s}", "1GiB", s) for s in SCHEDS]
    exports = [{"name": f"e-{s}", "device": f"ram-{s}"} for s in SCHEDS]
    res = {}
    with common.Scratch("e7") as tmp, servers.start_nbdsched(tmp, "d", devices, exports) as srv:
        for n in counts:
            for s in SCHEDS:   # interleaved per connection count
                g = common.fio_base(runtime, 0)
                g.update({"uri": srv.uri(f"e-{s}"), "rw": "randread", "bs": "4k", "iodepth": 8, "numjobs": n})
                res[(n, s)] = fio.run(g, [("c", {})], [srv], timeout=120 + 10 * runtime + n)
        commands = common.commands_for(srv, list(res.values()))
    rows, out = [], {}
    for n in counts:
        base = res[(n, "none")].summary()["iops"]
        for s in SCHEDS:
            r = res[(n, s)]
            sm = r.summary()
            us = r.server_cpu[0] / sm["ios"] * 1e6 if sm["ios"] else 0
            floor = sm["ios"] / r.wall if r.wall else 0
            busy = r.server_cpu[0] / r.wall if r.wall else 0
            out[(n, s)] = (sm["iops"], us, busy, floor)
            rows.append((n, s, report.f0(sm["iops"]), report.f0(floor), f"{sm['iops'] / base:.2f}" if base else "-",
                         f"{us:.1f}", f"{busy:.0%}", report.f0(sm["lat_us"])))
    text = report.table(["connections", "scheduler", "requests/s (sum of jobs)", "requests / fio wall s",
                         "vs none", "daemon CPU us/request", "daemon CPU / fio wall", "avg lat (us)"], rows)
    text += (f"\n\nOne run of {runtime} s per cell, the schedulers interleaved per connection count. CPU per "
             "request is the daemon's utime+stime over the run (connection setup included) divided by the "
             "requests completed; it includes the NBD protocol work, which is the same for all three "
             "schedulers, so the scheduler's own cost is the difference to `none`. \"requests/s\" sums fio's "
             "per-job rates, which overstates the aggregate when 1000 threads start staggered; \"requests / fio "
             "wall s\" divides all requests by the whole fio invocation including connection setup, a lower "
             "bound. The daemon is one Asio thread; CPU above 100% is its helper threads.")
    cost = {(n, s): 1 - out[(n, s)][0] / out[(n, "none")][0] for n in counts for s in ("cfq", "bfq")
            if out[(n, "none")][0]}
    cpu_cost = {(n, s): out[(n, s)][1] / out[(n, "none")][1] - 1 for n in counts for s in ("cfq", "bfq")
                if out[(n, "none")][1]}
    verdict = ("Scheduler cost in throughput vs `none` (positive = slower): " +
               ", ".join(f"{s} x{n}: {c:+.0%}" for (n, s), c in cost.items()) + ". In daemon CPU per request "
               "(the steadier measure on a shared machine): " +
               ", ".join(f"{s} x{n}: {c:+.0%}" for (n, s), c in cpu_cost.items()) + ". ")
    busy_none = max(out[(n, "none")][2] for n in counts)
    verdict += ("With `none` the daemon used at most "
                f"{busy_none:.0%} of a core: where that is well below 100%, fio (on the same 2 shared "
                "cores) and not the daemon set the rate, and the per-request CPU is the better measure.")
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict)]
    labels = [f"{n} conn" for n in counts]
    report.bars(report.plot_path(NAME, a.quick), "RAM, 4k randread qd8 per connection: daemon CPU per request",
                labels, [(s, [out[(n, s)][1] for n in counts]) for s in SCHEDS], "daemon CPU us / request")
    print(report.write(NAME, "Experiment 7: scheduler cost", sections, facts, commands, quick=a.quick,
                       summary={"setup": "RAM, 4k randread qd8, 1/100/1000 connections: none vs cfq vs bfq",
                                "seed": "-",
                                "ours": "; ".join(f"x{n}: " + ", ".join(f"{s} {out[(n, s)][0]:,.0f}/s "
                                                                        f"{out[(n, s)][1]:.1f} us"
                                                                        for s in SCHEDS) for n in counts),
                                "target": "cfq/bfq within 10% of none (aim 5%)",
                                "status": "met" if all(c <= 0.10 for c in cost.values()) else
                                          "missed: " + ", ".join(f"{s} x{n} {c:+.0%}" for (n, s), c in cost.items()
                                                                 if c > 0.10)}))
    return {"out": out, "cost": cost}


if __name__ == "__main__":
    main()
