#!/usr/bin/env python3
"""Experiment 10's fair-pool case for one scheduler, repeated and
interleaved across binaries: the qd1 reader alone, then beside the 8 x 64
flooder, each rep on a fresh daemon per binary (one `hdd` device, groups
`reader` and `flood` of equal weight, a pool of 32 shared by weight).
Prints per rep the reader's p99 alone and flooded and their ratio, and the
reader's and the flooder's IOPS three ways: fio's own iops (the flooder's
reads low: its runtime also counts the wait for its last 512 requests after
the window), fio's requests over the window (what exp10 reports), and the
daemon's count per export over the same wall-clock window, with the
scheduler's requests dispatched per group and the time it held the device
idle for each (`ctl stats` before and after). --flood-alone adds the flooder alone (total /
flooder alone is what bounding the reader costs). --json also keeps `ctl
stats` after each flooded run and fio's output, --ctl prints other ctl
output. Not part of run-all.

  bench/flooded_reader_probe.py --server old=PATH --server new=PATH --reps 3 [--scheduler cfq] [--tunable k=v]
                                [--flood-alone]

A p99 of one 12 s run rests on about 5 reads, so the probe also prints the
share of the flooded reader's reads over 20 and over 50 ms (fio's latency
bins: the bin "50" counts (20, 50] ms)."""
import argparse
import json
import os
import statistics
import sys
import time

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402
from exp10_request_pool import SLOTS, percentile  # noqa: E402   # the experiment's pool and its latency reading


def over_ms(job, ms):
    """Share of the job's reads whose completion latency exceeded `ms` (fio's
    latency_ms bins, which are cumulative from their lower bound)."""
    bins = job.get("latency_ms", {})
    return sum(v for k, v in bins.items() if k.lstrip(">=").isdigit() and int(k.lstrip(">=")) > ms) / 100


def counted(srv):
    """Per export: requests completed; per group: the scheduler's requests
    dispatched and ms held idle for it; and when (the middle of the call)."""
    t = time.monotonic()
    st = srv.stats()["devices"][0]
    exports = {e["name"]: e["requests"] for e in st["exports"]}
    groups = {g["name"]: (g["sched"]["dispatched"], g["sched"]["idle_ms"]) for g in st["groups"]}
    return exports, groups, (t + time.monotonic()) / 2


def one(tmp, tag, binary, scheduler, tunables, runtime, ramp, extra_ctl, flood_alone):
    os.environ["NBDSCHED"] = binary
    devices = [common.ram_device("d", "1TiB", scheduler, tunables, "hdd", read_ahead_kb=0)]
    exports = [{"name": "reader", "device": "d", "size": "512GiB", "group": "reader"},
               {"name": "flood", "device": "d", "offset": "512GiB", "group": "flood"}]
    groups = [{"name": "reader", "weight": 100}, {"name": "flood", "weight": 100}]
    limits = {"max_inflight_per_device": SLOTS, "inflight_fair_share": True}
    out = {}
    with servers.start_nbdsched(tmp, tag, devices, exports, groups, limits=limits, control=True) as srv:
        for case in ("alone", "flooded", "flood alone") if flood_alone else ("alone", "flooded"):
            g = common.fio_base(runtime, ramp)
            g.update({"rw": "randread", "bs": "4k", "percentile_list": "50:90:99:99.5"})
            jobs = [] if case == "flood alone" else [("reader", {"uri": srv.uri("reader"), "iodepth": 1})]
            if case != "alone":
                jobs.append(("flood", {"uri": srv.uri("flood"), "iodepth": 64, "numjobs": 8}))
            # The daemon's counters over fio's window: from its ramp to its end.
            with fio.start(g, jobs, [srv]) as running:
                time.sleep(ramp)
                e0, g0, t0 = counted(srv)
                time.sleep(runtime)
                e1, g1, t1 = counted(srv)
                r = running.finish()
            o = {"served": {k: (e1[k] - e0.get(k, 0)) / (t1 - t0) for k in e1},
                 "dispatched": {k: (g1[k][0] - g0[k][0]) / (t1 - t0) for k in g1},
                 "idle": {k: (g1[k][1] - g0[k][1]) / (t1 - t0) / 1000 for k in g1}}
            if case != "flood alone":
                reader = r.job("reader")[0]
                o.update({"p50": percentile(reader, 50), "p90": percentile(reader, 90),
                          "p99": percentile(reader, 99), "iops": reader["read"]["iops"],
                          "window": r.window_iops([reader], "read"), "mean": reader["read"]["clat_ns"]["mean"] / 1000,
                          "over20": over_ms(reader, 20), "over50": over_ms(reader, 50)})
            if case != "alone":
                o["flood"] = r.summary(r.job("flood"), "read")["iops"]
                o["flood_window"] = r.window_iops(r.job("flood"), "read")
                o["fio"] = r.data
            out[case] = o
            if case == "flooded":
                out["stats"] = srv.stats()
                for a in extra_ctl:
                    out.setdefault("ctl", {})[a] = srv.ctl(*a.split())
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", required=True, help="NAME=PATH of an nbdsched binary")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--scheduler", default="cfq")
    p.add_argument("--tunable", action="append", default=[], help="KEY=VALUE of the device's scheduler")
    p.add_argument("--runtime", type=float, default=12)
    p.add_argument("--ramp", type=float, default=3)
    p.add_argument("--ctl", action="append", default=[], help="a ctl command to print after the flooded run")
    p.add_argument("--flood-alone", action="store_true", help="also run the flooder alone")
    p.add_argument("--json", help="write every rep's numbers and counters here")
    a = p.parse_args()
    bins = [s.split("=", 1) for s in a.server]
    tunables = dict(t.split("=", 1) for t in a.tunable) or None
    res = {name: [] for name, _ in bins}
    with TempDir("e10p") as tmp:
        for rep in range(a.reps):
            for name, path in (bins if rep % 2 == 0 else bins[::-1]):
                o = one(tmp, f"{name}{rep}", path, a.scheduler, tunables, a.runtime, a.ramp, a.ctl, a.flood_alone)
                res[name].append(o)
                al, fl = o["alone"], o["flooded"]
                print(f"rep {rep} {name:8} p99 alone {al['p99']:8.0f} flooded {fl['p99']:8.0f} "
                      f"x{fl['p99'] / al['p99']:.2f}  p50 {fl['p50']:7.0f} p90 {fl['p90']:7.0f} "
                      f"mean {fl['mean']:7.0f}  >20ms {fl['over20']:.1%} >50ms {fl['over50']:.2%}  reader {fl['iops']:5.1f} "
                      f"flood {fl['flood']:5.1f} IOPS", flush=True)
                print(f"      {name:8} over the window: fio reader {fl['window']:5.1f} "
                      f"flood {fl['flood_window']:5.1f}; "
                      f"daemon served reader {fl['served']['reader']:5.1f} flood {fl['served']['flood']:5.1f}, "
                      f"dispatched reader {fl['dispatched']['reader']:5.1f} flood {fl['dispatched']['flood']:5.1f}; "
                      f"held idle for the reader {fl['idle']['reader']:.1%} of the window, "
                      f"for the flooder {fl['idle']['flood']:.1%}", flush=True)
                if "flood alone" in o:
                    fa = o["flood alone"]
                    total = fl["served"]["reader"] + fl["served"]["flood"]
                    print(f"      {name:8} flood alone: fio {fa['flood']:5.1f}, "
                          f"over the window {fa['flood_window']:5.1f}, "
                          f"daemon served {fa['served']['flood']:5.1f}; reader + flood beside it "
                          f"{total:5.1f} = {total / fa['served']['flood']:.0%} of it (daemon's counts)", flush=True)
                for c, text in o.get("ctl", {}).items():
                    print(f"--- ctl {c}\n{text}", flush=True)
    print("summary (median over reps):")
    for name, runs in res.items():
        def med(f):
            return statistics.median(f(o) for o in runs)
        print(f"  {name:8} x{med(lambda o: o['flooded']['p99'] / o['alone']['p99']):.2f}  "
              f"mean {med(lambda o: o['flooded']['mean']):.0f} us  >20ms {med(lambda o: o['flooded']['over20']):.1%} >50ms {med(lambda o: o['flooded']['over50']):.2%}  "
              f"reader {med(lambda o: o['flooded']['iops']):.1f} "
              f"flood {med(lambda o: o['flooded']['flood']):.1f} (fio); "
              f"served reader {med(lambda o: o['flooded']['served']['reader']):.1f} "
              f"flood {med(lambda o: o['flooded']['served']['flood']):.1f} (daemon)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
