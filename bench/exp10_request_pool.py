"""Experiment 10, a fair request pool: one `hdd` device, two groups of equal
weight, `limits.max_inflight_per_device: 32` so that the device's pool of
in-flight requests matters. Group `reader`: one qd1 random 4 KiB reader.
Group `flood`: 8 connections x iodepth 64 random 4 KiB reads (512 requests
wanting 32 slots). The reader's p50/p99 completion latency alone and beside
the flooder, with the pool first come first served across groups
(`inflight_fair_share: false`, main's behaviour) and shared by weight
(`true`, the default), for cfq and bfq. With the fair pool also the
flooder alone: the total beside the reader over it is what bounding the
reader's wait costs in throughput."""

import os
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp10-request-pool"
# (device name, scheduler, tunables): at their defaults, and with short slices
# (16 ms instead of cfq's slice_sync 100 ms / bfq's timeout_sync 125 ms),
# which bound how long the reader's group waits while the flooder's group is served.
DEVICES = [("cfq", "cfq", None), ("bfq", "bfq", None), ("cfq-16ms", "cfq", {"slice_sync": "16ms"}),
           ("bfq-16ms", "bfq", {"timeout_sync": "16ms"})]
SCHEDULERS = [d[0] for d in DEVICES]
POOLS = [("fifo", False), ("fair", True)]   # (label, limits.inflight_fair_share)
SLOTS = 32
TARGET = 3.0   # the reader's p99 beside the flooder, at most this times its p99 alone


def percentile(job, p):
    """Completion latency percentile of a fio job's reads, in microseconds."""
    return job["read"].get("clat_ns", {}).get("percentile", {}).get(f"{p:.6f}", 0) / 1000


def run_pool(tmp, fair, runtime, ramp, flood_depth):
    """{(scheduler, 'alone'|'flooded'|'flood alone'): (p50, p99, reader IOPS, flood IOPS)} for one daemon
    (the flooder alone only with the fair pool)."""
    devices = [common.ram_device(name, "1TiB", s, tun, "hdd", read_ahead_kb=0) for name, s, tun in DEVICES]
    exports = []
    for s in SCHEDULERS:
        exports.append({"name": f"reader-{s}", "device": s, "size": "512GiB", "group": "reader"})
        exports.append({"name": f"flood-{s}", "device": s, "offset": "512GiB", "group": "flood"})
    groups = [{"name": "reader", "weight": 100}, {"name": "flood", "weight": 100}]
    limits = {"max_inflight_per_device": SLOTS, "inflight_fair_share": fair}
    out, runs = {}, []
    with servers.start_nbdsched(tmp, "fair" if fair else "fifo", devices, exports, groups, limits=limits) as srv:
        for s in SCHEDULERS:
            for case in ("alone", "flooded", "flood alone") if fair else ("alone", "flooded"):
                g = common.fio_base(runtime, ramp)
                g.update({"rw": "randread", "bs": "4k"})
                jobs = [] if case == "flood alone" else [("reader", {"uri": srv.uri(f"reader-{s}"), "iodepth": 1})]
                if case != "alone":
                    jobs.append(("flood", {"uri": srv.uri(f"flood-{s}"), "iodepth": flood_depth, "numjobs": 8}))
                r = fio.run(g, jobs, [srv])
                runs.append(r)
                # Over the window: fio's own iops counts the flooder's wait
                # for its last 512 requests (seconds on this disk) as runtime.
                flood = r.window_iops(r.job("flood"), "read") if case != "alone" else None
                if case == "flood alone":
                    out[(s, case)] = (None, None, None, flood)
                    continue
                reader = r.job("reader")[0]
                out[(s, case)] = (percentile(reader, 50), percentile(reader, 99), r.window_iops([reader], "read"),
                                  flood)
        commands = common.commands_for(srv, runs)
    return out, commands


def main():
    a = common.args(__doc__)
    # Quick: a shallow flooder, since fio waits for every request it has
    # queued (8 x 64 at ~110 IOPS on this disk took 5 s per run to drain).
    # A 3 s ramp: the flooder starts with the device's queue to itself and
    # fills it (32 requests at ~10 ms) before the reader's first request, which
    # then waits for it to drain; the reader's first ~1.6 s show that start,
    # not the sharing this experiment is about (at 1 s, 1% of the reads
    # measured were from it: p99 130 ms, then 26 ms with a 3 s ramp).
    runtime, ramp, flood_depth = (0.5, 0.2, 8) if a.quick else (12, 3, 64)
    facts = report.Facts()
    res, commands = {}, []
    with TempDir("e10") as tmp:
        for label, fair in POOLS:
            out, cmds = run_pool(tmp, fair, runtime, ramp, flood_depth)
            commands += [f"# pool {label}"] + cmds
            res.update({(label, *k): v for k, v in out.items()})
    rows, checks = [], {}
    for s in SCHEDULERS:
        for label, _ in POOLS:
            p50a, p99a, iopsa, _ = res[(label, s, "alone")]
            p50, p99, iops, flood = res[(label, s, "flooded")]
            factor = p99 / p99a if p99a else float("inf")
            checks[(label, s)] = factor
            rows.append((s, label, report.f0(p50a), report.f0(p99a), report.f0(p50), report.f0(p99),
                         f"**{factor:.1f}x**", report.f0(iopsa), report.f0(iops), report.f0(flood)))
    text = report.table(["scheduler", "pool", "p50 alone (us)", "p99 alone (us)", "p50 flooded (us)",
                         "p99 flooded (us)", "p99 flooded / alone", "reader IOPS alone", "reader IOPS flooded",
                         "flood IOPS"], rows)
    cost = [(s, report.f0(res[("fair", s, "flood alone")][3]),
             report.f0(res[("fair", s, "flooded")][2] + res[("fair", s, "flooded")][3]),
             f"{(res[('fair', s, 'flooded')][2] + res[('fair', s, 'flooded')][3]) / res[('fair', s, 'flood alone')][3]:.0%}")
            for s in SCHEDULERS]
    text += "\n\nThroughput, fair pool:\n\n" + report.table(
        ["scheduler", "flooder alone (IOPS)", "reader + flooder (IOPS)", "total / flooder alone"], cost)
    text += (f"\n\nOne run of {runtime} s (after {ramp} s ramp) per row and case; each pool setting is its own "
             "daemon (limits are daemon-wide) serving the four devices. Latency is fio's completion "
             "latency of the reader's 4 KiB reads; IOPS are the requests a job issued in the window over its "
             "length (fio's own iops divides the flooder's by a runtime that also counts its wait, after the "
             "window, for the 512 requests it still has out: seconds on this disk, so it read 38 where the daemon "
             "served 50; bench/flooded_reader_probe.py checks both against the daemon's counters). A random 4 KiB "
             "read on the profile costs a seek plus half a rotation (~8-9 ms). The ramp leaves out the start: "
             "the flooder, alone for a moment, fills the "
             "device's queue (32 requests) before the reader's first request, which then waits for it to "
             "drain (reader requests up to ~130 ms in the first ~1.6 s; with a 1 s ramp they were 1% of "
             "those measured).")
    # The status covers the devices at the schedulers' defaults; the short
    # slices are shown beside it, each with its own verdict, never folded in.
    met = all(checks[("fair", s)] <= TARGET for s in ("cfq", "bfq"))
    short = {s: checks[("fair", s)] for s in SCHEDULERS if s not in ("cfq", "bfq")}
    short_text = ", ".join(f"{s} x{f:.1f} ({'within' if f <= TARGET else 'over'} {TARGET:.0f}x)"
                           for s, f in short.items())
    status = f"defaults (cfq, bfq): {'met' if met else 'NOT met'}; 16 ms slices: {short_text}"
    # fio's p99 of the flooded reader rests on the 1% of its reads beyond it.
    tail = min(res[("fair", s, "flooded")][2] for s in SCHEDULERS) * runtime / 100
    verdict = (f"Target: the reader's p99 beside the flooder within {TARGET:.0f}x of its p99 alone with the fair "
               "pool. " + "; ".join(f"{s}: {checks[('fifo', s)]:.1f}x first come first served, "
                                    f"**{checks[('fair', s)]:.1f}x** fair" for s in SCHEDULERS) +
               f": **{'met' if met else 'NOT met'}** for the devices at the schedulers' defaults (cfq, bfq), "
               f"which is what the status covers; with 16 ms slices: {short_text}. Each p99 is one run's: the "
               f"flooded reader's rests on about {tail:.0f} reads beyond it, and the two pools ran in two "
               "daemons one after the other, not interleaved, so a factor near the target is within the run's "
               "noise. First come first served, the reader's every request "
               "waits at admission behind the flooder's connections in line (up to 8, each holding a ticket "
               "for one of the flooder's next requests), and the scheduler sees it only then. With the fair "
               f"pool the flooder may hold {SLOTS // 2} of the {SLOTS} slots while the reader's group uses the "
               "device (and for 24 ms after its last reply, the think time between two of its requests), so "
               "the reader's request is admitted at once and the scheduler's group fairness decides the rest. "
               "cfq's and bfq's `contended_seeky_depth` (1 by default) then serve a seeky queue one request at a "
               "time while another group is busy, so the reader waits behind about one of the flooder's requests "
               "instead of its slice or budget and its requests at the disk (docs/schedulers-cfq.md, "
               "docs/schedulers-bfq.md).")
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("hdd") + "\n\nDevice: 1 TiB sparse RAM, `read_ahead_kb: 0`; "
                 "schedulers at their defaults except the `-16ms` devices' slices; exports `reader` (first 512 GiB) and `flood` (the rest).")]
    labels = [f"{s} {label}" for s in SCHEDULERS for label, _ in POOLS]
    keys = [(label, s) for s in SCHEDULERS for label, _ in POOLS]
    report.bars(report.plot_path(NAME, a.quick), "qd1 reader p99 on hdd, pool of 32, beside an 8x64 flooder",
                labels, [("alone", [res[(label, s, "alone")][1] / 1000 for label, s in keys]),
                         ("flooded", [res[(label, s, "flooded")][1] / 1000 for label, s in keys])], "p99 (ms)")
    print(report.write(NAME, "Experiment 10: a fair request pool", sections, facts, commands, quick=a.quick,
                       summary={"setup": f"hdd, pool {SLOTS}, groups 1:1: qd1 random reader vs 8x64 flooder; "
                                         "cfq/bfq; pool first come first served vs fair",
                                "seed": "-",
                                "ours": "; ".join(f"{s}: p99 x{checks[('fifo', s)]:.1f} -> "
                                                  f"x{checks[('fair', s)]:.1f} of alone" for s in SCHEDULERS),
                                "target": f"p99 within {TARGET:.0f}x of alone",
                                "status": status}))
    return {"res": {"-".join(k): v for k, v in res.items()}, "checks": {"-".join(k): v for k, v in checks.items()},
            "met": met}


if __name__ == "__main__":
    main()
