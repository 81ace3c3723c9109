"""Experiment 3, seed 003 (group weights on an NCQ SSD): groups weighted 1000
and 100, one sequential sync 32 KiB writer each (iodepth 1 as in the seed, and 4
and 8), each on its own
export of one shared `ssd` device (`writes_sync: true`, so plain NBD writes
count as sync requests, like the seed's O_DIRECT writers): (a) slice_idle 0 +
group_idle 0, (b) slice_idle 0 + group_idle 8ms (the fix), for cfq and bfq,
against `scheduler: none` for the total."""

import os
import statistics
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import report  # noqa: E402
from nbdsched_test import servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp3-seed003-groups-ssd"
SEED = {"group_idle 0": (41.1, 40.5), "group_idle 8ms": (53.3, 32.6)}
# (label, scheduler, tunables)
CONFIGS = [("none", "none", None),
           ("cfq group_idle 0", "cfq", {"slice_idle": 0, "group_idle": 0}),
           ("cfq group_idle 8ms", "cfq", {"slice_idle": 0, "group_idle": "8ms"}),
           ("bfq group_idle 0", "bfq", {"slice_idle": 0, "group_idle": 0}),
           ("bfq group_idle 8ms", "bfq", {"slice_idle": 0, "group_idle": "8ms"})]


# The share: at least twice the seed's 1.64:1 (what the fix is for), at most
# 1.25x the 10:1 the weights ask for (over-serving the heavy group is no more
# right than under-serving it).
SHARE_MIN, SHARE_MAX = 1.64 * 2, 10 * 1.25
DEPTHS = [1, 4, 8]   # 1: the seed's shape; 4 and 8: tenants that could fill the device alone


def mean_share(runs):
    """(heavy, light, share, total) over repetitions: the mean MiB/s of each
    group and of the total, and the median of the per-repetition shares (with
    2 repetitions, their mean); runs: (heavy, light) MiB/s pairs."""
    heavy, light = [h for h, _ in runs], [l_ for _, l_ in runs]
    return (statistics.fmean(heavy), statistics.fmean(light), common.ratio_median(heavy, light),
            statistics.fmean(h + l_ for h, l_ in runs))


def verdict_for(out, depth, sched):
    """(share, total / none, status) of `sched` with group_idle 8ms at `depth`."""
    none_total = out[(depth, "none")][3]
    h, l_, rat, tot = out[(depth, f"{sched} group_idle 8ms")]
    # `none` serves both writers at once; if it measured clearly less than a
    # scheduler, the machine (not the emulated device) set the totals.
    none_sane = none_total >= 0.85 * max(out[(depth, c[0])][3] for c in CONFIGS)
    if rat < SHARE_MIN:
        ok = "missed"
    elif rat > SHARE_MAX:
        ok = "missed (over-served)"
    elif not none_sane:
        ok = "share met, total not assessable"
    elif tot >= 0.85 * none_total:
        ok = "met"
    else:
        ok = "share met, total inherent" if depth == 1 else "missed (total)"
    return rat, tot / none_total if none_total else 0, ok


def main():
    a = common.args(__doc__)
    runtime, ramp, reps = (0.5, 0.2, 1) if a.quick else (6, 1, 2)
    depths = [1, 8] if a.quick else DEPTHS
    facts = report.Facts()
    devices, exports = [], []
    for i, (label, sched, tun) in enumerate(CONFIGS):
        devices.append(common.ram_device(f"dev{i}", "256MiB", sched, tun, "ssd", writes_sync=True))
        exports.append({"name": f"heavy{i}", "device": f"dev{i}", "size": "128MiB", "group": "heavy"})
        exports.append({"name": f"light{i}", "device": f"dev{i}", "offset": "128MiB", "group": "light"})
    groups = [{"name": "heavy", "weight": 1000}, {"name": "light", "weight": 100}]
    res = {(d, c[0]): [] for d in depths for c in CONFIGS}
    runs = []
    with TempDir("e3") as tmp, servers.start_nbdsched(tmp, "d", devices, exports, groups, control=True) as srv:
        # A depth's repetitions run before the next depth, each repetition
        # of every configuration in turn. The devices live through the whole
        # run, and bfq's peak-rate estimate (max_budget, the price of a turn
        # charged by time) takes seconds to come down from iodepth 8's rate:
        # an iodepth 1 run right after one measured that transient (14-16:1
        # in the second repetition, 10-10.5:1 in the first), not the share
        # (tests/unit/sched/test_bfq_share.cpp, "right after iodepth 8").
        for depth in depths:
            for _ in range(reps):
                for i, (label, _, _) in enumerate(CONFIGS):
                    g = common.fio_base(runtime, ramp)
                    g.update({"rw": "write", "bs": "32k", "iodepth": depth})
                    jobs = [("heavy", {"uri": srv.uri(f"heavy{i}")}), ("light", {"uri": srv.uri(f"light{i}")})]
                    rate, r = common.server_window(srv, g, jobs, runtime, ramp)
                    runs.append(r)
                    res[(depth, label)].append((rate[f"heavy{i}"], rate[f"light{i}"]))
        commands = common.commands_for(srv, runs)

    out = {k: mean_share(v) for k, v in res.items()}
    rows = []
    for depth in depths:
        none_total = out[(depth, "none")][3]
        for label, _, _ in CONFIGS:
            h, l_, rat, tot = out[(depth, label)]
            key = "group_idle 8ms" if "8ms" in label else "group_idle 0" if "0" in label else None
            seed = SEED.get(key) if depth == 1 else None
            rows.append((depth, label, report.f1(h), report.f1(l_), f"{rat:.2f}:1", report.f1(tot),
                         f"{tot / none_total:.0%}" if none_total else "n/a",
                         f"{seed[0]} / {seed[1]} ({seed[0] / seed[1]:.2f}:1)" if seed and label != "none" else "-"))
    text = report.table(["iodepth", "ssd, weights 1000:100", "heavy MiB/s", "light MiB/s", "share", "total MiB/s",
                         "total / none", "seed MiB/s (share)"], rows)
    text += (f"\n\nThe mean of {reps} interleaved runs, and the median of their shares (with 2 repetitions, "
             "the mean of the two; a depth's repetitions run before the next depth's, so that an iodepth 1 run "
             "does not start on bfq's peak rate of an iodepth 8 one); MiB/s is per export (= fio job = "
             f"group), counted by the daemon over the same {runtime} s window for both jobs, {ramp} s after fio "
             "started (bench/lib/common.py server_window). The weights ask for 10:1. iodepth 1 is the "
             "seed's shape (one sync writer per group); iodepth 4 and 8 are tenants that keep enough writes "
             "in flight to fill the device alone.")
    checks = {(d, s): verdict_for(out, d, s) for d in depths for s in ("cfq", "bfq")}
    verdict = (f"Target (share at least {SHARE_MIN:.2f}:1, twice the seed's 1.64:1, and at most {SHARE_MAX:.1f}:1, "
               "1.25x the weights' 10:1; total >= 85% of `none`): ") + "; ".join(
        f"iodepth {d} {s}: **{ok}** ({r:.2f}:1, total {t:.0%})" for (d, s), (r, t, ok) in checks.items()) + ". "
    verdict += ("At iodepth 1 the total cannot reach 85%: each group has one writer with one request in "
                "flight, so serving the heavy group alone (which is what a 10:1 share means) leaves one "
                "request at the device instead of two, and the total can at best approach (1 + 1/10) / 2 = "
                "55% of `none`, which serves both writers at once (docs/simulator.md). A work-conserving "
                "scheduler that kept the total would have to give the light writer the capacity the heavy "
                "one cannot use, i.e. the 1:1 of `group_idle 0`. With writers that can fill the device "
                "(iodepth 4 and 8: 4 x 32 KiB in flight already cover the profile's 530 MiB/s link at "
                "~0.12 ms per write) the heavy group alone keeps the device busy, and share and total "
                "hold together.")
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("ssd") + "\n\nExports: `heavy` = first 128 MiB, `light` = "
                 "the next 128 MiB of one 256 MiB RAM device; fio wraps around in them.")]
    labels = [f"qd{d} {c[0]}" for d in depths for c in CONFIGS]
    keys = [(d, c[0]) for d in depths for c in CONFIGS]
    report.bars(report.plot_path(NAME, a.quick), "Seed 003: groups 1000:100 on ssd, 1 sync seq writer each",
                labels, [("heavy (1000)", [out[k][0] for k in keys]), ("light (100)", [out[k][1] for k in keys])],
                "MiB/s")
    deep = depths[-1]
    print(report.write(NAME, "Experiment 3: seed 003, group weights on an NCQ SSD", sections, facts, commands,
                       quick=a.quick, summary={
                           "setup": "ssd profile, groups 1000:100, 1 sync seq 32k writer each at iodepth 1 "
                                    f"(seed) and {deep}; group_idle 0 vs 8ms",
                           "seed": "41.1/40.5 -> 53.3/32.6 MiB/s (1.64:1)",
                           "ours": "; ".join(f"qd{d} {sch}: {out[(d, sch + ' group_idle 0')][2]:.2f}:1 -> "
                                             f"{r:.2f}:1, total {t:.0%} of none"
                                             for (d, sch), (r, t, _) in checks.items() if d in (1, deep)),
                           "target": f"share {SHARE_MIN:.2f}:1 to {SHARE_MAX:.1f}:1 (seed 1.64:1 x2; weights "
                                     "10:1 x1.25), total >= 85% of none",
                           "status": ", ".join(f"qd{d} {sch}: {ok}" for (d, sch), (_, _, ok) in checks.items()
                                               if d in (1, deep))},
                       runs={f"qd{d} {label}": [{"heavy_mib_s": round(h, 2), "light_mib_s": round(l_, 2)}
                                                for h, l_ in res[(d, label)]] for d, label in keys}))
    return {"out": out, "checks": checks}


if __name__ == "__main__":
    main()
