#!/usr/bin/env python3
"""Experiment 10's fair-pool case for one scheduler, repeated and
interleaved across binaries: the qd1 reader alone, then beside the 8 x 64
flooder, each rep on a fresh daemon per binary (one `hdd` device, groups
`reader` and `flood` of equal weight, a pool of 32 shared by weight).
Prints per rep the reader's p99 alone and flooded and their ratio, and the
reader's and the flooder's IOPS; --json also keeps `ctl stats` after each
flooded run, --ctl prints other ctl output. Not part of run-all.

  bench/flooded_reader_probe.py --server old=PATH --server new=PATH --reps 3 [--scheduler cfq] [--tunable k=v]

A p99 of one 12 s run rests on about 5 reads, so the probe also prints the
share of the flooded reader's reads over 20 and over 50 ms (fio's latency
bins: the bin "50" counts (20, 50] ms)."""
import argparse
import json
import os
import statistics
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

SLOTS = 32


def percentile(job, p):
    return job["read"].get("clat_ns", {}).get("percentile", {}).get(f"{p:.6f}", 0) / 1000


def over_ms(job, ms):
    """Share of the job's reads whose completion latency exceeded `ms` (fio's
    latency_ms bins, which are cumulative from their lower bound)."""
    bins = job.get("latency_ms", {})
    return sum(v for k, v in bins.items() if k.lstrip(">=").isdigit() and int(k.lstrip(">=")) > ms) / 100


def one(tmp, tag, binary, scheduler, tunables, runtime, ramp, extra_ctl):
    os.environ["NBDSCHED"] = binary
    devices = [common.ram_device("d", "1TiB", scheduler, tunables, "hdd", read_ahead_kb=0)]
    exports = [{"name": "reader", "device": "d", "size": "512GiB", "group": "reader"},
               {"name": "flood", "device": "d", "offset": "512GiB", "group": "flood"}]
    groups = [{"name": "reader", "weight": 100}, {"name": "flood", "weight": 100}]
    limits = {"max_inflight_per_device": SLOTS, "inflight_fair_share": True}
    out = {}
    with servers.start_nbdsched(tmp, tag, devices, exports, groups, limits=limits, control=True) as srv:
        for case in ("alone", "flooded"):
            g = common.fio_base(runtime, ramp)
            g.update({"rw": "randread", "bs": "4k", "percentile_list": "50:90:99:99.5"})
            jobs = [("reader", {"uri": srv.uri("reader"), "iodepth": 1})]
            if case == "flooded":
                jobs.append(("flood", {"uri": srv.uri("flood"), "iodepth": 64, "numjobs": 8}))
            r = fio.run(g, jobs, [srv])
            reader = r.job("reader")[0]
            out[case] = {"p50": percentile(reader, 50), "p90": percentile(reader, 90),
                         "p99": percentile(reader, 99), "iops": reader["read"]["iops"],
                         "mean": reader["read"]["clat_ns"]["mean"] / 1000, "over20": over_ms(reader, 20), "over50": over_ms(reader, 50)}
            if case == "flooded":
                out[case]["flood"] = r.summary(r.job("flood"), "read")["iops"]
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
    p.add_argument("--json", help="write every rep's numbers and counters here")
    a = p.parse_args()
    bins = [s.split("=", 1) for s in a.server]
    tunables = dict(t.split("=", 1) for t in a.tunable) or None
    res = {name: [] for name, _ in bins}
    with TempDir("e10p") as tmp:
        for rep in range(a.reps):
            for name, path in (bins if rep % 2 == 0 else bins[::-1]):
                o = one(tmp, f"{name}{rep}", path, a.scheduler, tunables, a.runtime, a.ramp, a.ctl)
                res[name].append(o)
                al, fl = o["alone"], o["flooded"]
                print(f"rep {rep} {name:8} p99 alone {al['p99']:8.0f} flooded {fl['p99']:8.0f} "
                      f"x{fl['p99'] / al['p99']:.2f}  p50 {fl['p50']:7.0f} p90 {fl['p90']:7.0f} "
                      f"mean {fl['mean']:7.0f}  >20ms {fl['over20']:.1%} >50ms {fl['over50']:.2%}  reader {fl['iops']:5.1f} "
                      f"flood {fl['flood']:5.1f} IOPS", flush=True)
                for c, text in o.get("ctl", {}).items():
                    print(f"--- ctl {c}\n{text}", flush=True)
    print("summary (median over reps):")
    for name, runs in res.items():
        def med(f):
            return statistics.median(f(o) for o in runs)
        print(f"  {name:8} x{med(lambda o: o['flooded']['p99'] / o['alone']['p99']):.2f}  "
              f"mean {med(lambda o: o['flooded']['mean']):.0f} us  >20ms {med(lambda o: o['flooded']['over20']):.1%} >50ms {med(lambda o: o['flooded']['over50']):.2%}  "
              f"reader {med(lambda o: o['flooded']['iops']):.1f} flood {med(lambda o: o['flooded']['flood']):.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
