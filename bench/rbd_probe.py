"""nbdsched + rbd, several builds or librados settings side by side
(docs/rbd.md): on one throwaway one-host cluster (tests/ceph/cluster.sh),
one prefilled 256 MiB image; per round each variant serves it in turn (order
rotated per round), fio --ioengine=nbd runs one workload against it. Per run:
IOPS; CPU per I/O of the client (fio), the daemon (per thread name with -v:
its own loop, librados' io_context_pool, the messenger) and the OSD; context
switches per I/O (/proc/PID/task/*/status); the daemon's completions per
event-loop wake-up (its log). At the end medians and, against the first
variant, the IOPS ratio of each round (paired: the host may be shared).
Not part of run-all; run it under `flock /tmp/bench.lock`.

  bench/rbd_probe.py --variant old=/path/nbdsched --variant new=build/daemon/nbdsched \\
      --variant ref=fio-rbd,conf='rbd cache=false' --rounds 6 --runtime 3 \\
      --workload randread:4k:64 --workload write:1M:8

A variant is NAME=BINARY[,conf=KEY=VALUE;KEY=VALUE][,cache=MODE]: BINARY
is an nbdsched executable, or `fio-rbd` for fio's own rbd engine (librbd
inside fio, no NBD); conf lines go into the [client] section of a copy of
the cluster's ceph.conf that the variant uses; cache is the device's
rbd_cache (writearound, writeback; nbdsched only).

  bench/rbd_probe.py --variant nbdsched=build/daemon/nbdsched \\
      --variant nbdsched-wa=build/daemon/nbdsched,cache=writearound --variant fio-rbd=fio-rbd"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/lib/python")]
from nbdsched_test import servers  # noqa: E402
from nbdsched_test.ceph import Cluster  # noqa: E402
from nbdsched_test.process import thread_stats  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

def by_name(before, after):
    """{thread name: [cpu s, switches, threads]} spent between two thread_stats() reads."""
    out = {}
    for tid, (name, cpu, switches) in after.items():
        _, cpu0, switches0 = before.get(tid, (name, 0.0, 0))
        e = out.setdefault(name, [0.0, 0, 0])
        e[0] += cpu - cpu0
        e[1] += switches - switches0
        e[2] += 1
    return out


def parse_variant(text):
    name, rest = text.split("=", 1)
    binary, *opts = rest.split(",")
    v = {"name": name, "binary": binary, "conf": [], "cache": None}
    for o in opts:
        key, value = o.split("=", 1)
        if key == "conf":
            v["conf"] = [line.replace("=", " = ", 1) for line in value.split(";")]
        elif key == "cache" and binary != "fio-rbd":
            v["cache"] = value
        else:
            raise SystemExit(f"unknown variant option {key} (for {binary})")
    return v


def conf_for(cluster, v):
    if not v["conf"]:
        return cluster.conf
    path = f"{cluster.conf}.{v['name']}"
    with open(cluster.conf) as f:
        text = f.read()
    assert "\n[client]\n" in text, "no [client] section"
    with open(path, "w") as f:
        f.write(text.replace("\n[client]\n", "\n[client]\n" + "\n".join(v["conf"]) + "\n", 1))
    return path


def run_one(v, workload, tmp, cluster, runtime, tag):
    rw, bs, depth = workload
    conf = conf_for(cluster, v)
    srv = None
    if v["binary"] == "fio-rbd":
        engine = ["--ioengine=rbd", "--clientname=admin", "--pool=rbd", "--rbdname=img1"]
    else:
        dev = {"name": "vol", "backend": "rbd", "pool": "rbd", "image": "img1", "ceph_conf": conf,
               "client": "admin", "rotational": False}
        if v["cache"]:
            dev["rbd_cache"] = v["cache"]
        os.environ["NBDSCHED"] = v["binary"]
        srv = servers.start_nbdsched(tmp, tag, [dev], [{"name": "x", "device": "vol"}], log_level="info")
        engine = ["--ioengine=nbd", f"--uri={srv.uri('x')}"]
    try:
        osd = cluster.pids()["osd.0"]
        osd0, d0 = thread_stats(osd), thread_stats(srv.pid) if srv else {}
        ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        argv = ["fio", "--name=j", f"--rw={rw}", f"--bs={bs}", f"--iodepth={depth}", "--time_based",
                f"--runtime={runtime}", "--size=256M", "--output-format=json", *engine]
        r = subprocess.run(argv, env=dict(os.environ, CEPH_CONF=conf), capture_output=True, text=True,
                           timeout=runtime * 4 + 60, check=True)
        ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        osd_spent, daemon = by_name(osd0, thread_stats(osd)), by_name(d0, thread_stats(srv.pid) if srv else {})
    finally:
        if srv:
            srv.stop()
    job = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]
    d = job["read" if "read" in rw else "write"]
    ios = max(d["total_ios"], 1)
    us = 1e6 / ios
    res = {"iops": d["iops"],
           "client_us": (ch1.ru_utime - ch0.ru_utime + ch1.ru_stime - ch0.ru_stime) * us,
           "client_csw": (ch1.ru_nvcsw - ch0.ru_nvcsw + ch1.ru_nivcsw - ch0.ru_nivcsw) / ios,
           "daemon_us": sum(e[0] for e in daemon.values()) * us,
           "daemon_csw": sum(e[1] for e in daemon.values()) / ios,
           "osd_us": sum(e[0] for e in osd_spent.values()) * us,
           "osd_csw": sum(e[1] for e in osd_spent.values()) / ios,
           "threads": {k: [e[0] * us, e[1] / ios, e[2]] for k, e in daemon.items()}}
    if srv:
        for line in srv.log().splitlines():
            if "asynchronous completions in" in line:
                words = line.split("device vol: ")[1].split()
                res["per_wakeup"] = int(words[0]) / max(int(words[4]), 1)
    return res


def report(results, names):
    med = statistics.median
    for key, by in results.items():
        print(key)
        for n in names:
            rs = by[n]
            total = med(r["client_us"] + r["daemon_us"] + r["osd_us"] for r in rs)
            line = (f"  {n:>10}: IOPS {med(r['iops'] for r in rs):7.0f}  CPU µs/I/O client "
                    f"{med(r['client_us'] for r in rs):6.1f} daemon {med(r['daemon_us'] for r in rs):6.1f} "
                    f"osd {med(r['osd_us'] for r in rs):6.1f} total {total:6.1f}  daemon switches/I/O "
                    f"{med(r['daemon_csw'] for r in rs):.2f}")
            if all("per_wakeup" in r for r in rs):
                line += f"  completions/wake-up {med(r['per_wakeup'] for r in rs):.1f}"
            if n != names[0]:
                ratios = [a["iops"] / b["iops"] for a, b in zip(rs, by[names[0]])]
                line += f"  vs {names[0]} {med(ratios):.2f} ({' '.join(f'{x:.2f}' for x in ratios)})"
            print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", action="append", required=True)
    ap.add_argument("--workload", action="append", help="RW:BS:DEPTH (default randread:4k:64)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runtime", type=int, default=3)
    ap.add_argument("--json", help="write every run here")
    ap.add_argument("-v", "--verbose", action="store_true", help="the daemon's CPU per thread name")
    a = ap.parse_args()
    variants = [parse_variant(s) for s in a.variant]
    workloads = [(w.split(":")[0], w.split(":")[1], int(w.split(":")[2])) for w in a.workload or ["randread:4k:64"]]
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results = {}
    t0 = time.monotonic()
    tmp = TempDir("rbd-probe")
    try:
        with Cluster(tmp.path, ["img1:256M"]) as cluster:
            subprocess.run(["fio", "--name=fill", "--ioengine=rbd", "--clientname=admin", "--pool=rbd",
                            "--rbdname=img1", "--rw=write", "--bs=4M", "--iodepth=8", "--size=256M"],
                           env=cluster.env(), check=True, capture_output=True, timeout=300)
            for rnd in range(a.rounds):
                for wl in workloads:
                    key = f"{wl[0]} {wl[1]} qd{wl[2]}"
                    turn = rnd % len(variants)
                    for v in variants[turn:] + variants[:turn]:
                        r = run_one(v, wl, tmp.path, cluster, a.runtime, f"{v['name']}-{rnd}")
                        results.setdefault(key, {}).setdefault(v["name"], []).append(r)
                        print(f"{rnd} {key} {v['name']}: {r['iops']:.0f} IOPS, daemon {r['daemon_us']:.1f} µs "
                              f"{r['daemon_csw']:.2f} switches per I/O, osd {r['osd_us']:.1f} µs", flush=True)
                        if a.verbose:
                            for name, e in sorted(r["threads"].items(), key=lambda kv: -kv[1][0])[:5]:
                                print(f"    {name} x{e[2]}: {e[0]:.1f} µs, {e[1]:.2f} switches per I/O")
    finally:
        tmp.remove()
    print(f"{time.monotonic() - t0:.0f} s; load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    report(results, [v["name"] for v in variants])


if __name__ == "__main__":
    main()
