"""Experiment 2, seed 002 (BFQ on an SSD): 5 jobs of 4k random reads with
the sync engine (iodepth 1), each its own connection, all in one group:
slice_idle 8ms (idling on) vs 0 (off) vs auto on the `ssd` profile."""

import os
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp2-seed002-bfq-ssd"
SEED = {"8ms": (4136, 1189.07, 17221.65, 16.9), "0": (7246, 670.11, 1054.76, 29.7)}
CONFIGS = ["8ms", "0", "auto"]


def main():
    a = common.args(__doc__)
    runtime, ramp, reps = (0.5, 0.2, 1) if a.quick else (5, 1, 2)
    facts = report.Facts()
    devices = [common.ram_device(f"ssd-{c}", "1GiB", "bfq", {"slice_idle": c}, "ssd") for c in CONFIGS]
    exports = [{"name": f"e-{c}", "device": f"ssd-{c}"} for c in CONFIGS]
    res = {c: [] for c in CONFIGS}
    with TempDir("e2") as tmp, servers.start_nbdsched(tmp, "d", devices, exports) as srv:
        for _ in range(reps):
            for c in CONFIGS:
                g = common.fio_base(runtime, ramp)
                g.update({"uri": srv.uri(f"e-{c}"), "rw": "randread", "bs": "4k", "iodepth": 1, "numjobs": 5})
                res[c].append(fio.run(g, [("temp", {})], [srv]))
        commands = common.commands_for(srv, [r for c in CONFIGS for r in res[c]])

    def field(c, name):
        return [r.summary()[name] for r in res[c]]

    s = {c: common.mean_summary(res[c]) for c in CONFIGS}
    cpu = {c: max(r.busy(ramp) for r in res[c]) for c in CONFIGS}
    rows = []
    for c in CONFIGS:
        seed = SEED.get(c)
        rows.append((f"`slice_idle {c}`", report.f0(s[c]["iops"]), report.f0(s[c]["lat_us"]),
                     report.f0(s[c]["sd_us"]), report.f1(s[c]["bw_mib"]), f"{cpu[c]:.0%}",
                     f"{seed[0]} / {seed[1]:,.0f} / {seed[2]:,.0f} / {seed[3]:.1f}" if seed else "-"))
    gain = common.ratio_median(field("0", "iops"), field("8ms", "iops"))
    seed_gain = SEED["0"][0] / SEED["8ms"][0]
    sd_ratio = common.ratio_median(field("8ms", "sd_us"), field("0", "sd_us"))
    # Linux >= 6.0 (and nbdsched): one group is not an asymmetric scenario, and
    # random readers on a queueing SSD are not idled for throughput, so
    # slice_idle 8ms must not plug the device: the seed's loss does not occur.
    met = abs(gain - 1) <= 0.15
    # `auto` is 0 on an SSD: one setting measured twice. If the two differ by
    # more than the 15% the target allows, the machine set the result.
    spread = abs(common.ratio_median(field("auto", "iops"), field("0", "iops")) - 1)
    status = "inconclusive" if spread > 0.15 else "met" if met else "missed"
    text = report.table(["bfq on `ssd`", "IOPS", "avg lat (us)", "lat stddev (us)", "bw (MiB/s)",
                         "daemon CPU", "seed: IOPS / avg lat (us) / stddev (us) / MB/s"], rows)
    text += (f"\n\nIdling off / on: **{gain:.2f}x** IOPS (seed {seed_gain:.2f}x); latency stddev on / off: "
             f"**{sd_ratio:.1f}x** (seed {SEED['8ms'][2] / SEED['0'][2]:.1f}x).\n\n"
             f"Mean of {reps} interleaved runs of {runtime} s (after {ramp} s ramp); the ratios are the median "
             "of the per-repetition ratios (with 2 repetitions, their mean). The ideal of the "
             "profile: 5 queues at depth 1 on 8 channels of 100 us = ~5 x 9.3k IOPS without idling; idling "
             "for one queue at a time would give ~9.3k IOPS.")
    verdict = ("Target (Linux 6.x rule: a single group is not an asymmetric scenario, so on a queueing SSD "
               f"`slice_idle 8ms` does not plug the device; IOPS within 15% of `slice_idle 0`): "
               f"**{status}** ({gain:.2f}x; latency stddev {sd_ratio:.1f}x; `auto`, the same setting as `0` on "
               f"an SSD, differs from it by {spread:.0%}: above 15% the run is inconclusive). The seed's "
               f"{seed_gain:.2f}x loss came from a 4.19 kernel; nbdsched idled for every sync queue with the "
               "`> 0` rule until it followed mainline's `> 1`. The loss remains where groups compete (each reader "
               "in a group of its own: `tests/unit/sched/test_bfq_share.cpp`). ")
    if s["0"]["iops"] < 0.6 * 46600:
        verdict += (f"Without idling the 5 clients reached {s['0']['iops']:,.0f} IOPS of the profile's ~46.6k "
                    f"(daemon at {cpu['0']:.0%} of a core): the round trips of 5 synchronous fio threads on this "
                    "shared 2-core machine, not the emulated SSD, set the rate.")
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("ssd") + "\n\nScheduler: bfq, defaults except `slice_idle` "
                 "(`group_idle` 8ms is irrelevant here: one group).")]
    report.bars(report.plot_path(NAME, a.quick), "Seed 002: bfq on ssd, 5 x 4k randread sync",
                [f"slice_idle {c}" for c in CONFIGS],
                [("nbdsched", [s[c]["iops"] for c in CONFIGS]),
                 ("seed local SSD", [SEED["8ms"][0], SEED["0"][0], SEED["0"][0]])], "IOPS")
    print(report.write(NAME, "Experiment 2: seed 002, BFQ idling on an SSD", sections, facts, commands,
                       quick=a.quick, summary={
                           "setup": "bfq, ssd profile, 5 x 4k randread sync: slice_idle 8ms vs 0",
                           "seed": "4136 -> 7246 IOPS (1.75x), stddev 17222 -> 1055 us",
                           "ours": f"{s['8ms']['iops']:,.0f} -> {s['0']['iops']:,.0f} IOPS ({gain:.2f}x), stddev "
                                   f"{s['8ms']['sd_us']:,.0f} -> {s['0']['sd_us']:,.0f} us",
                           "target": "6.x rule: slice_idle 8ms within 15% of 0 in one group",
                           "status": status},
                       runs={f"slice_idle {c}": report.fio_runs(res[c]) for c in CONFIGS}))
    return {"iops": {c: s[c]["iops"] for c in CONFIGS}, "gain": gain, "sd_ratio": sd_ratio, "met": met}


if __name__ == "__main__":
    main()
