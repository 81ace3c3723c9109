"""Experiment 1, seed 000 (CFQ on an SSD): 10 jobs of 4k random reads at
iodepth 64, each its own connection (= scheduler queue), slice_idle 8ms vs 0
vs auto, on the `ssd` profile and on a slower, deeper cloud-like variant."""

import os
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp1-seed000-cfq-ssd"
SEED = {"8ms": (7054, 90.107e3, 38.697e3, 28217 / 1024), "0": (29255, 21.836e3, 11.730e3, 117022 / 1024)}
LOCAL = {"8ms": (19320, 33.043e3, 14.068e3, 77281 / 1024), "0": (21626, 29.465e3, 12.662e3, 86507 / 1024)}
CONFIGS = ["8ms", "0", "auto"]
# The kernel's request pool: nr_requests defaults to 128, so of the 640 I/Os
# fio keeps in flight only 128 reach the scheduler, handed out first come,
# first served. limits.max_inflight_per_device does the same here.
NR_REQUESTS = 128
# (profile overrides, what it stands for, the seed's table it is compared with)
VARIANTS = {
    "ssd": (None, "the `ssd` profile as documented (a SATA SSD: 8 channels x 100 us)", LOCAL),
    "cloud": ({"read_latency": "550us", "channels": 16},
              "`ssd` with `read_latency: 550us, channels: 16`: a network-attached volume, slower per request "
              "and deeper", SEED),
}


def main():
    a = common.args(__doc__)
    runtime, ramp, reps = (0.5, 0.2, 1) if a.quick else (5, 1, 2)
    facts = report.Facts()
    keys = [(v, c) for v in VARIANTS for c in CONFIGS]
    devices = [common.ram_device(f"{v}-{c}", "1GiB", "cfq", {"slice_idle": c}, "ssd", VARIANTS[v][0])
               for v, c in keys]
    exports = [{"name": f"e-{v}-{c}", "device": f"{v}-{c}"} for v, c in keys]
    res = {k: [] for k in keys}
    with TempDir("e1") as tmp, servers.start_nbdsched(tmp, "d", devices, exports,
                                                             limits={"max_inflight_per_device": NR_REQUESTS}) as srv:
        for _ in range(reps):           # interleaved: 8ms, 0, auto, 8ms, 0, auto
            for v, c in keys:
                g = common.fio_base(runtime, ramp)
                g.update({"uri": srv.uri(f"e-{v}-{c}"), "rw": "randread", "bs": "4k", "iodepth": 64,
                          "numjobs": 10})
                res[(v, c)].append(fio.run(g, [("temp", {})], [srv]))
        commands = common.commands_for(srv, [r for k in keys for r in res[k]])

    def iops(k):
        return [r.summary()["iops"] for r in res[k]]

    s = {k: common.mean_summary(res[k]) for k in keys}
    cpu = {k: max(r.busy(ramp) for r in res[k]) for k in keys}
    rows = []
    for v, c in keys:
        seed = VARIANTS[v][2].get(c)
        rows.append((v, f"`slice_idle {c}`", report.f0(s[(v, c)]["iops"]), report.f0(s[(v, c)]["lat_us"]),
                     report.f0(s[(v, c)]["sd_us"]), report.f1(s[(v, c)]["bw_mib"]), f"{cpu[(v, c)]:.0%}",
                     f"{seed[0]} / {seed[1]:,.0f} / {seed[2]:,.0f} / {seed[3]:.1f}" if seed else "-"))
    gain = {v: common.ratio_median(iops((v, "0")), iops((v, "8ms"))) for v in VARIANTS}
    gain_auto = {v: common.ratio_median(iops((v, "auto")), iops((v, "8ms"))) for v in VARIANTS}
    seed_gain = SEED["0"][0] / SEED["8ms"][0]
    local_gain = LOCAL["0"][0] / LOCAL["8ms"][0]
    # Within 2x either way: a gain far above the seed's is as far from it as one far below.
    seed_ratio = {v: VARIANTS[v][2]["0"][0] / VARIANTS[v][2]["8ms"][0] for v in VARIANTS}
    def in_band(v, g):
        return g > 1 and seed_ratio[v] / 2 <= g <= seed_ratio[v] * 2

    within = {v: in_band(v, gain[v]) for v in VARIANTS}
    # `auto` is 0 on a non-rotational device: the two rows are one setting
    # measured twice. Where they differ as much as the effect judged, or
    # `auto` in place of `0` turns the verdict, the machine set the result.
    spread = {v: abs(common.ratio_median(iops((v, "auto")), iops((v, "0"))) - 1) for v in VARIANTS}
    inconclusive = {v: spread[v] >= abs(gain[v] - 1) or in_band(v, gain_auto[v]) != within[v] for v in VARIANTS}
    status = {v: "inconclusive" if inconclusive[v] else "met" if within[v] else "missed" for v in VARIANTS}
    text = report.table(["device", "cfq", "IOPS", "avg lat (us)", "lat stddev (us)", "bw (MiB/s)", "daemon CPU",
                         "seed (local SSD for ssd, cloud SSD for cloud): IOPS / avg lat (us) / stddev (us) / MiB/s"],
                        rows)
    text += ("\n\n" + "; ".join(f"`{v}`: idling off / on **{gain[v]:.2f}x** (`auto` / on {gain_auto[v]:.2f}x)"
                                for v in VARIANTS) +
             f". Seed: {seed_gain:.2f}x on a cloud SSD, {local_gain:.2f}x on a local SSD.\n\n"
             + "\n".join(f"* `{v}`: {VARIANTS[v][1]}" for v in VARIANTS) +
             f"\n\nBoth with `limits.max_inflight_per_device: {NR_REQUESTS}`, the kernel's default `nr_requests`: "
             "of the 640 reads fio keeps in flight, 128 reach the scheduler and the rest wait in line, first "
             "come, first served, as they did in the seed's kernel. "
             f"Each row is the mean of {reps} interleaved runs of {runtime} s (after {ramp} s ramp); the "
             "gains are the median of the per-repetition ratios (with 2 repetitions, their mean), so a ratio "
             "never mixes two repetitions; latency is fio's `lat` (submission to completion), pooled over the "
             "10 jobs. "
             "\"daemon CPU\" is the daemon's CPU time over fio's measured time (highest of the runs), in cores. "
             "A device's requests all run on one event loop thread (`limits.threads` gives one loop per CPU, "
             "devices placed round-robin: docs/threads.md) and each run drives one device, so near 100% means "
             "that loop, not the emulated device, was the limit.")
    verdict = ("Target (same direction, ratio between half and twice the seed's): " +
               f"`ssd` against the local SSD's {local_gain:.2f}x (needs {max(1, local_gain / 2):.2f}x to "
               f"{local_gain * 2:.2f}x): **{status['ssd']}** "
               f"({gain['ssd']:.2f}x); `cloud` against the cloud SSD's {seed_gain:.2f}x (needs "
               f"{seed_gain / 2:.2f}x to {seed_gain * 2:.2f}x): **{status['cloud']}** "
               f"({gain['cloud']:.2f}x). ")
    verdict += ("How CFQ gets there (the model follows `cfq_may_dispatch`): with idling on an SSD each queue is "
                "served alone and may keep only `quantum/2` = 4 reads at the device, because "
                "`now + slice_idle * dispatched` runs past the slice end (`cfq_slice_used_soon`); without "
                "idling the active queue may keep `quantum` = 8, and when it runs dry (its client waits in the "
                "128-request line behind the other nine) the next queue starts while the previous one's reads "
                "are still at the device. So idling costs half or more of a device that is deeper than 4. "
                "The `cloud` variant's 550 us per read is not independent evidence: it is what 4 reads in "
                "flight need to give the seed's 7054 IOPS with idling on, so its idle-on row matches the seed "
                "by construction; the 16 channels put the ceiling near the seed's 29255 IOPS without idling. "
                "The ratio is what the model adds: about 2x, not the seed's 4.15x. Two readings of the 4.x "
                "sources that would give more were checked and do not: (a) `cfq_may_dispatch` lifts the limit "
                "for the only busy queue (or only busy sync queue), and our CFQ has that rule "
                "(tests/unit/sched/test_cfq_dispatch_limits.cpp), but here it never applies: while any client "
                "waits for the pool, the pool holds >= 127 requests and the device 8, so the scheduler holds "
                "more than one client's 64 and at least two queues are busy; (b) the kernel's batching request "
                "allocator (`__get_request`: batches of up to 32 from one woken process, up to 3/2 x 128), "
                "modelled in the simulator, does deliver bursts one process at a time, but the depth stays at "
                "8 (mean 8.00) and idling stops costing anything (fewer busy queues, longer slices): 14,168 "
                "vs 14,164 IOPS, 1.00x (docs/simulator.md, `tests/unit/sim/test_request_pool.cpp`). So the "
                "daemon's admission is left as it is, and the kernel's mechanism is elsewhere: on a "
                "fixed-latency device every pool gives <= 2x in the model, so the seed's idle-on run must have "
                "left its device idle about half the time, or its device's per-read latency depended on the "
                "depth (bench/results/analysis.md). ")
    fio_bound = s[("ssd", "0")]["iops"] < 0.6 * 80000
    if fio_bound:
        who = "the daemon's CPU" if cpu[("ssd", "0")] > 0.8 else "fio's 10 client threads (the daemon used " \
              f"{cpu[('ssd', '0')]:.0%} of a core)"
        verdict += (f"On `ssd` without idling the device ran at {s[('ssd', '0')]['iops']:,.0f} IOPS, well below "
                    f"the profile's ~80k: {who} on this shared 2-core machine set that rate, so the `ssd` gain "
                    "is a lower bound (the simulator gives 2.0x for it: docs/simulator.md). ")
    verdict += ("`auto` picks 0 on a non-rotational device (seed 000's change), so its row measures the idling-off "
                "setting a second time: " + "; ".join(f"`{v}` `auto` differs from `0` by {spread[v]:.0%} against "
                                                      f"an effect of {gain[v] - 1:+.0%}" for v in VARIANTS) +
                ". A status is inconclusive where that spread reaches the effect, or where `auto` in place of `0` "
                "would turn it; then the machine's load, not the scheduler, set the difference: run it again at a "
                "quiet hour.")
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("ssd") + "\n\nThe `cloud` rows override `read_latency: 550us` "
                 "and `channels: 16`. Scheduler: cfq, defaults except `slice_idle`. Device `queue_depth` 0 (= the "
                 "profile's 32).")]
    report.bars(report.plot_path(NAME, a.quick), "Seed 000: cfq, 10 x 4k randread qd64, 128-request pool",
                [f"{v} slice_idle {c}" for v, c in keys],
                [("nbdsched", [s[k]["iops"] for k in keys]),
                 ("seed (local for ssd, cloud for cloud)",
                  [VARIANTS[v][2]["8ms" if c == "8ms" else "0"][0] for v, c in keys])], "IOPS")
    print(report.write(NAME, "Experiment 1: seed 000, CFQ idling on an SSD", sections, facts, commands,
                       quick=a.quick, summary={
                           "setup": "cfq, ssd profile (+ a cloud-like variant), 10 x 4k randread qd64, "
                                    "128-request pool: slice_idle 8ms vs 0",
                           "seed": f"cloud SSD 7054 -> 29255 IOPS ({seed_gain:.2f}x); local SSD "
                                   f"19320 -> 21626 ({local_gain:.2f}x)",
                           "ours": "; ".join(f"{v}: {s[(v, '8ms')]['iops']:,.0f} -> {s[(v, '0')]['iops']:,.0f} "
                                             f"IOPS ({gain[v]:.2f}x), auto {s[(v, 'auto')]['iops']:,.0f}"
                                             for v in VARIANTS),
                           "target": "same direction, between half and twice the seed ratio",
                           "status": f"ssd vs local SSD: {status['ssd']}; cloud vs cloud SSD: {status['cloud']}"},
                       runs={f"{v} slice_idle {c}": report.fio_runs(res[(v, c)]) for v, c in keys}))
    return {"iops": {f"{v}-{c}": s[(v, c)]["iops"] for v, c in keys}, "gain": gain, "met": within,
            "status": status}


if __name__ == "__main__":
    main()
