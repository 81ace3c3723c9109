"""Experiment 3, seed 003 (group weights on an NCQ SSD): groups weighted 1000
and 100, one sequential sync 32 KiB writer each (iodepth 1), each on its own
export of one shared `ssd` device (`writes_sync: true`, so plain NBD writes
count as sync requests, like the seed's O_DIRECT writers): (a) slice_idle 0 +
group_idle 0, (b) slice_idle 0 + group_idle 8ms (the fix), for cfq and bfq,
against `scheduler: none` for the total."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import common  # noqa: E402
import fio  # noqa: E402
import report  # noqa: E402
import servers  # noqa: E402

NAME = "exp3-seed003-groups-ssd"
SEED = {"group_idle 0": (41.1, 40.5), "group_idle 8ms": (53.3, 32.6)}
# (label, scheduler, tunables)
CONFIGS = [("none", "none", None),
           ("cfq group_idle 0", "cfq", {"slice_idle": 0, "group_idle": 0}),
           ("cfq group_idle 8ms", "cfq", {"slice_idle": 0, "group_idle": "8ms"}),
           ("bfq group_idle 0", "bfq", {"slice_idle": 0, "group_idle": 0}),
           ("bfq group_idle 8ms", "bfq", {"slice_idle": 0, "group_idle": "8ms"})]


def main():
    a = common.args(__doc__)
    runtime, ramp, reps = (1, 0.5, 1) if a.quick else (6, 1, 2)
    facts = report.Facts()
    devices, exports = [], []
    for i, (label, sched, tun) in enumerate(CONFIGS):
        devices.append(common.ram_device(f"dev{i}", "256MiB", sched, tun, "ssd", writes_sync=True))
        exports.append({"name": f"heavy{i}", "device": f"dev{i}", "size": "128MiB", "group": "heavy"})
        exports.append({"name": f"light{i}", "device": f"dev{i}", "offset": "128MiB", "group": "light"})
    groups = [{"name": "heavy", "weight": 1000}, {"name": "light", "weight": 100}]
    res = {c[0]: [] for c in CONFIGS}
    with common.Scratch("e3") as tmp, servers.start_nbdsched(tmp, "d", devices, exports, groups) as srv:
        for _ in range(reps):
            for i, (label, _, _) in enumerate(CONFIGS):
                g = common.fio_base(runtime, ramp)
                g.update({"rw": "write", "bs": "32k", "iodepth": 1})
                jobs = [("heavy", {"uri": srv.uri(f"heavy{i}")}), ("light", {"uri": srv.uri(f"light{i}")})]
                res[label].append(fio.run(g, jobs, [srv]))
        commands = common.commands_for(srv, [r for c in CONFIGS for r in res[c[0]]])

    out = {}
    for label, _, _ in CONFIGS:
        runs = []
        for r in res[label]:
            pj = r.per_job("write")
            h, l_ = pj["heavy"]["bw_mib"], pj["light"]["bw_mib"]
            runs.append((h, l_, h / l_ if l_ else float("inf"), h + l_))
        runs.sort(key=lambda x: x[2])
        out[label] = runs[len(runs) // 2]   # the run with the median share ratio
    none_total = out["none"][3]
    rows = []
    for label, _, _ in CONFIGS:
        h, l_, rat, tot = out[label]
        key = "group_idle 8ms" if "8ms" in label else "group_idle 0" if "0" in label else None
        seed = SEED.get(key)
        rows.append((label, report.f1(h), report.f1(l_), f"{rat:.2f}:1", report.f1(tot),
                     f"{tot / none_total:.0%}" if none_total else "n/a",
                     f"{seed[0]} / {seed[1]} ({seed[0] / seed[1]:.2f}:1)" if seed and label != "none" else "-"))
    text = report.table(["ssd, weights 1000:100", "heavy MiB/s", "light MiB/s", "share", "total MiB/s",
                         "total / none", "seed MiB/s (share)"], rows)
    text += (f"\n\nThe run with the median share of {reps} interleaved runs of {runtime} s (after {ramp} s "
             "ramp); MiB/s is per fio job (= export = group). The weights ask for 10:1.")
    # `none` serves both writers at once; if it measured clearly less than a
    # scheduler, the machine (not the emulated device) set the totals.
    none_sane = none_total >= 0.85 * max(out[c[0]][3] for c in CONFIGS)
    checks = []
    for sched in ("cfq", "bfq"):
        h, l_, rat, tot = out[f"{sched} group_idle 8ms"]
        if rat <= 1.64 * 2:
            ok = "missed"
        elif not none_sane:
            ok = "share met, total not assessable"
        else:
            ok = "met" if tot >= 0.85 * none_total else "missed (total)"
        checks.append((sched, rat, tot / none_total if none_total else 0, ok))
    verdict = "Target (share well beyond 1.64:1 with total >= 85% of `none`): " + "; ".join(
        f"{s}: **{ok}** ({r:.2f}:1, total {t:.0%})" for s, r, t, ok in checks) + ". "
    if any(ok == "missed (total)" for _, _, _, ok in checks):
        verdict += ("Where the share holds but the total falls short, that is inherent to this load: each "
                    "group has one writer at iodepth 1, so serving the heavy group alone (which is what a "
                    "10:1 share means) leaves one request at the device instead of two; the total can at best "
                    "approach (1 + 1/10) / 2 = 55% of `none`, which serves both writers at once "
                    "(docs/simulator.md). The 85% target is not reachable with depth-1 writers.")
    best_total = max(out[c[0]][3] for c in CONFIGS)
    if none_total < 0.85 * best_total:
        verdict += (f" Note: `none` measured a lower total ({none_total:.1f} MiB/s) than the schedulers (up to "
                    f"{best_total:.1f}). On the `ssd` profile a 32 KiB write takes ~0.12 ms of emulated time, so "
                    "a depth-1 writer's rate is set by the real round trip through fio and the daemon on this "
                    "loaded machine, not by the emulated device; the totals (and the \"total / none\" column) "
                    "then measure the machine, and only the share ratios are meaningful.")
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("ssd") + "\n\nExports: `heavy` = first 128 MiB, `light` = "
                 "the next 128 MiB of one 256 MiB RAM device; fio wraps around in them.")]
    labels = [c[0] for c in CONFIGS]
    report.bars(report.plot_path(NAME, a.quick), "Seed 003: groups 1000:100 on ssd, 1 sync seq writer each",
                labels, [("heavy (1000)", [out[x][0] for x in labels]), ("light (100)", [out[x][1] for x in labels])],
                "MiB/s")
    print(report.write(NAME, "Experiment 3: seed 003, group weights on an NCQ SSD", sections, facts, commands,
                       quick=a.quick, summary={
                           "setup": "ssd profile, groups 1000:100, 1 sync seq 32k writer each; group_idle 0 vs 8ms",
                           "seed": "41.1/40.5 -> 53.3/32.6 MiB/s (1.64:1)",
                           "ours": "; ".join(f"{sch}: {out[sch + ' group_idle 0'][2]:.2f}:1 -> {r:.2f}:1 "
                                             f"({out[sch + ' group_idle 8ms'][0]:.1f}/"
                                             f"{out[sch + ' group_idle 8ms'][1]:.1f} MiB/s), total {t:.0%} of none"
                                             for sch, r, t, _ in checks),
                           "target": "share well beyond 1.64:1, total >= 85% of none",
                           "status": ", ".join(f"{sch}: {ok}" for sch, _, _, ok in checks)}))
    return {"out": out, "checks": checks}


if __name__ == "__main__":
    main()
