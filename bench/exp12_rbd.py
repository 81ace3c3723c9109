"""Experiment 12, nbdsched in front of Ceph RBD: on one throwaway one-host
cluster (tests/ceph/cluster.sh: one monitor, one memstore OSD), one image,
prefilled, served three ways:

  fio-rbd   fio's own rbd engine: librbd inside fio, no NBD (the limit)
  fio-rbd-nocache   the same with `rbd cache = false`, librbd as nbdsched
            and qemu-nbd --cache=none run it (librbd's default cache,
            write-around once fio's initial flush is done, answers a
            write when it is sent, before the OSD has it)
  qemu-nbd  qemu's rbd driver (qemu-block-extra) behind qemu-nbd, fio --ioengine=nbd
  nbdsched  backend: rbd (librbd's asynchronous API), fio --ioengine=nbd
  nbdsched-cache   the same with the device's `rbd_cache: writearound`,
            librbd's cache as fio-rbd runs it (like for like with fio-rbd)

Workloads: 4k random read and write at 64 in flight, 1 MiB sequential read
and write at 8 in flight, one job each. The three take turns on each
workload, in an order rotated between repetitions (interleaved), and a
server runs only during its turn (nbdsched holds the image's exclusive
lock). CPU per I/O: the serving process's CPU time over the run divided by
the I/Os; for fio-rbd, fio's own CPU (librbd runs in it). Medians. Beside
it, where the CPU of an I/O goes on the host: the client (fio: its nbd
engine, or for fio-rbd fio with librbd), the server's own threads (named
after it), the server's other threads (librbd's messenger and workers), the
OSD, and their total (what two shared cores have to pay per I/O).

Usage: bench/exp12_rbd.py [--quick] [--reps N] [--runtime S]
Writes bench/results/exp12-rbd.{json,md}. Not while CI runs (the machine's
2 cores are the cluster, the server and the client at once)."""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.ceph import Cluster  # noqa: E402
from nbdsched_test.process import cpu_seconds, thread_cpu_seconds  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
NAME = "exp12-rbd"
SERVERS = ["fio-rbd", "fio-rbd-nocache", "qemu-nbd", "nbdsched", "nbdsched-cache"]
FIO_RBD = ("fio-rbd", "fio-rbd-nocache")
WORKLOADS = [("randread", "4k", 64), ("randwrite", "4k", 64), ("read", "1M", 8), ("write", "1M", 8)]
IMAGE_MIB = 256


def start(server, tmp, cluster, tag):
    if server in ("nbdsched", "nbdsched-cache"):
        dev = {"name": "vol", "backend": "rbd", "pool": "rbd", "image": "img1", "ceph_conf": cluster.conf,
               "client": "admin", "rotational": False}
        if server == "nbdsched-cache":
            dev["rbd_cache"] = "writearound"
        return servers.start_nbdsched(tmp, tag, [dev], [{"name": "x", "device": "vol"}])
    if server == "qemu-nbd":
        return servers.start_qemu_nbd(tmp, tag, f"rbd:rbd/img1:conf={cluster.conf}:id=admin",
                                      extra=["--cache=none"])
    return None


def nocache_conf(cluster):
    """The cluster's ceph.conf with librbd's cache off for clients."""
    path = cluster.conf + ".nocache"
    if not os.path.exists(path):
        with open(cluster.conf) as f:
            text = f.read()
        # cluster.sh writes [client] last: the line goes into it.
        assert text.rstrip().rsplit("\n[", 1)[1].startswith("client]"), "[client] is not the last section"
        with open(path, "w") as f:
            f.write(text.rstrip() + "\nrbd cache = false\n")
    return path


def own_and_librbd(before, after, own):
    """CPU seconds of the threads named `own`, and of the others (librbd's)."""
    spent = {k: v - before.get(k, 0.0) for k, v in after.items()}
    mine = sum(v for k, v in spent.items() if k == own)
    return mine, sum(spent.values()) - mine


def run_one(server, workload, tmp, cluster, runtime, tag):
    rw, bs, depth = workload
    opts = {"rw": rw, "bs": bs, "iodepth": depth, "time_based": True, "runtime": runtime, "ramp_time": 1,
            "size": f"{IMAGE_MIB}M"}
    srv = start(server, tmp, cluster, tag)
    try:
        if srv:
            job = {"ioengine": "nbd", "uri": srv.uri("x")}
            cpu0 = cpu_seconds(srv.pid)
            threads0 = thread_cpu_seconds(srv.pid)
            # The server's own threads carry its main thread's name (the
            # executable's, cut to 15 characters: a copy named
            # nbdsched-abc1234 is not "nbdsched", qemu-nbd not "qemu").
            with open(f"/proc/{srv.pid}/comm") as f:
                own_name = f.read().strip()
        else:
            job = {"ioengine": "rbd", "clientname": "admin", "pool": "rbd", "rbdname": "img1"}
        # fio's rbd engine has no config-file option
        os.environ["CEPH_CONF"] = nocache_conf(cluster) if server == "fio-rbd-nocache" else cluster.conf
        osd = cluster.pids()["osd.0"]
        osd0 = cpu_seconds(osd)
        children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = fio.run(opts, [("job", job)], timeout=runtime * 4 + 60)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        osd_cpu = cpu_seconds(osd) - osd0
        client = (children.ru_utime - children0.ru_utime) + (children.ru_stime - children0.ru_stime)
        s = r.summary()
        # Over the ramp-up too, so the I/Os are scaled to ramp + runtime.
        own = librbd = 0.0
        if srv:
            cpu = cpu_seconds(srv.pid) - cpu0
            own, librbd = own_and_librbd(threads0, thread_cpu_seconds(srv.pid), own_name)
        else:   # fio with librbd's threads, all of its process (reaped: RUSAGE_CHILDREN)
            cpu = client
        ios = s["ios"] * (runtime + 1) / runtime
        per_io = (lambda sec: sec / ios * 1e6) if ios else (lambda sec: 0.0)
        return {"iops": s["iops"], "mib_s": s["bw_mib"], "lat_us": s["lat_us"], "p99_us": s["p99_us"],
                "cpu_us_per_io": per_io(cpu), "client_us": per_io(client), "own_us": per_io(own),
                "librbd_us": per_io(librbd), "osd_us": per_io(osd_cpu),
                "total_us": per_io(client + osd_cpu + (cpu if srv else 0.0))}
    finally:
        if srv:
            srv.stop()


def prefill(cluster):
    env = dict(os.environ, CEPH_CONF=cluster.conf)
    subprocess.run(["fio", "--name=fill", "--ioengine=rbd", "--clientname=admin", "--pool=rbd", "--rbdname=img1",
                    "--rw=write", "--bs=4M", "--iodepth=8", f"--size={IMAGE_MIB}M"],
                   env=env, check=True, capture_output=True, timeout=300)


def paired(by_server, server, ref):
    """server's IOPS over ref's: the median over the repetitions of each
    repetition's ratio (the servers took turns in it), not the ratio of the
    two medians. Fails on a run with no I/O rather than dividing by 0."""
    num, den = ([r["iops"] for r in by_server[s]] for s in (server, ref))
    if len(num) != len(den) or not all(num + den):
        raise RuntimeError(f"{server} {num} against {ref} {den} IOPS: a repetition missing or without I/O")
    return common.ratio_median(num, den)


def summary(results):
    """The row bench/lib/summary.py puts in bench/results/README.md."""
    ratios = {ref: [paired(by_server, "nbdsched", ref) for by_server in results.values()]
              for ref in ("fio-rbd", "fio-rbd-nocache", "qemu-nbd")}
    fio_r, nocache, qemu = ([f"{r:.2f}x" for r in ratios[ref]] for ref in ("fio-rbd", "fio-rbd-nocache", "qemu-nbd"))
    # Like for like with fio-rbd's librbd cache, where that was measured.
    cached = [paired(by_server, "nbdsched-cache", "fio-rbd") for by_server in results.values()
              if "nbdsched-cache" in by_server]
    best = [max(a, b) for a, b in zip(ratios["fio-rbd"], cached)] if cached else ratios["fio-rbd"]
    met = all(r >= 0.9 for r in best) and all(r >= 1.0 for r in ratios["qemu-nbd"])
    with_cache = f"; with rbd_cache: writearound vs fio-rbd: {' / '.join(f'{r:.2f}x' for r in cached)}" if cached else ""
    return {"name": NAME, "title": "Experiment 12: nbdsched + RBD",
            "setup": "one-host memstore cluster; nbdsched backend rbd vs fio's rbd engine vs qemu-nbd; "
                     + ", ".join(results), "seed": "-",
            "ours": f"vs fio-rbd: {' / '.join(fio_r)}; vs fio-rbd with rbd_cache off: {' / '.join(nocache)}; "
                    f"vs qemu-nbd: {' / '.join(qemu)}{with_cache}",
            "target": ">= 0.9x fio-rbd (with or without librbd's cache), >= 1x qemu-nbd", "status": "met" if met else "not met"}


def report(results, args, elapsed):
    lines = ["# Experiment 12: nbdsched + RBD against fio's rbd engine and qemu-nbd", "",
             f"One-host cluster (1 mon, 1 memstore OSD), one {IMAGE_MIB} MiB image, prefilled; "
             f"{args.reps} interleaved repetitions of {args.runtime} s (+1 s ramp), medians (a ratio: the median "
             "of each repetition's ratio); "
             f"run took {elapsed:.0f} s. `bench/exp12_rbd.py --reps {args.reps} --runtime {args.runtime}`.", "",
             "| workload | server | IOPS | MiB/s | mean lat µs | p99 µs | CPU µs/I/O | vs fio-rbd "
             "| vs fio-rbd-nocache | vs qemu-nbd |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for wl in WORKLOADS:
        key = f"{wl[0]} {wl[1]} qd{wl[2]}"
        if key not in results:   # --quick runs the first workload only
            continue
        med = {s: {m: statistics.median(r[m] for r in results[key][s]) for m in results[key][s][0]}
               for s in SERVERS}
        for s in SERVERS:
            m = med[s]
            lines.append(f"| {key} | {s} | {m['iops']:.0f} | {m['mib_s']:.1f} | {m['lat_us']:.0f} | "
                         f"{m['p99_us']:.0f} | {m['cpu_us_per_io']:.1f} | "
                         + " | ".join(f"{paired(results[key], s, ref):.2f}x"
                                      for ref in ("fio-rbd", "fio-rbd-nocache", "qemu-nbd")) + " |")
    lines += ["", "nbdsched-cache: nbdsched with the device's `rbd_cache: writearound`, librbd's cache as "
              "fio-rbd runs it (docs/rbd.md); nbdsched: its default, `rbd_cache: off`, like fio-rbd-nocache.",
              "", "CPU µs/I/O: the serving process (nbdsched, qemu-nbd; librbd runs inside each) or, for "
              "fio-rbd, the whole fio process (fio and librbd); the NBD servers' client (fio's nbd engine) "
              "is not counted.", "",
              "Where the CPU of an I/O goes (µs per I/O, medians): the client (fio's nbd engine; for fio-rbd "
              "fio with librbd), the server's own threads (those named after it), its other threads (librbd: "
              "messenger, io_context_pool, ...), the OSD, and the total of the three processes.", "",
              "| workload | server | client | server own | server librbd | OSD | total | IOPS x total / 1e6 |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for wl in WORKLOADS:
        key = f"{wl[0]} {wl[1]} qd{wl[2]}"
        if key not in results or "total_us" not in results[key][SERVERS[0]][0]:
            continue
        for srv in SERVERS:
            m = {k: statistics.median(r[k] for r in results[key][srv])
                 for k in ("iops", "client_us", "own_us", "librbd_us", "osd_us", "total_us")}
            own = f"{m['own_us']:.1f}" if srv not in FIO_RBD else "-"
            lib = f"{m['librbd_us']:.1f}" if srv not in FIO_RBD else "(in client)"
            lines.append(f"| {key} | {srv} | {m['client_us']:.1f} | {own} | {lib} | {m['osd_us']:.1f} | "
                         f"{m['total_us']:.1f} | {m['iops'] * m['total_us'] / 1e6:.2f} |")
    lines += ["", "IOPS x total / 1e6: CPU seconds per second the three processes got (at most 2: the "
              "cores); where it is about the same for all three servers the host's CPU is the limit, and "
              "the IOPS go inversely with the total.",
              "", f"Load average (1, 5, 15 min) at the start: {args.load_start}; at the end: {args.load_end}."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=5)
    args = ap.parse_args()
    workloads = WORKLOADS
    if args.quick:   # a smoke run (bench/run-all --quick): one workload, 1 s each
        args.reps, args.runtime, workloads = 1, 1, WORKLOADS[:1]
    t0 = time.monotonic()
    args.load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results = {}
    tmp = TempDir("exp12")
    try:
        with Cluster(tmp.path, [f"img1:{IMAGE_MIB}M"]) as cluster:
            prefill(cluster)
            for rep in range(args.reps):
                for i, wl in enumerate(workloads):
                    key = f"{wl[0]} {wl[1]} qd{wl[2]}"
                    turn = (rep + i) % len(SERVERS)
                    order = SERVERS[turn:] + SERVERS[:turn]
                    for s in order:
                        r = run_one(s, wl, tmp.path, cluster, args.runtime, f"{s}-{rep}-{i}")
                        results.setdefault(key, {}).setdefault(s, []).append(r)
                        print(f"rep {rep} {key} {s}: {r['iops']:.0f} IOPS, {r['mib_s']:.1f} MiB/s, "
                              f"{r['cpu_us_per_io']:.1f} µs CPU/IO", flush=True)
    finally:
        tmp.remove()
    args.load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = report(results, args, time.monotonic() - t0)
    out = os.path.join(RESULTS, "quick" if args.quick else "", NAME)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump(summary(results) | {"results": results}, f, indent=1)
    with open(out + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
