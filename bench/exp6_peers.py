"""Experiment 6, protocol overhead against the peers (no emulation, RAM):
nbdsched (`none`, `cfq`, `bfq`) vs `nbdkit memory` (its default 16 threads,
and `--threads 1`; the targets are judged against the faster of the two in
each repetition) vs `qemu-nbd` and `nbd-server` on a
/dev/shm file, over a Unix socket and TCP loopback; 4k randread and
randwrite at iodepth 1/16/64 with 1 and 2 jobs, 1 MiB sequential read and
write at iodepth 8; and fio directly on the /dev/shm file (libaio, no protocol) as
the limit.

Every server+transport is its own process (nbdkit, qemu-nbd and nbd-server
serve one address per process; nbdsched is started once per scheduler and
transport too), so the CPU time of each is its own (nbd-server's includes
the process it forks for each connection). One fio invocation per workload
and repetition runs all of them back to back (`stonewall`), in an order
rotated between repetitions: the servers are interleaved in time, 3 times.
Every export is written once first (1 MiB writes, one server after the
other): reads then copy data rather than holes, and no server pays for its
first touch of memory inside a measured job."""

import os
import subprocess
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import exp6_report  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp6-peers"
SCHEDS = ["none", "cfq", "bfq"]
TRANSPORTS = ["unix", "tcp"]
WORKLOADS = ([(rw, "4k", qd, nj) for rw in ("randread", "randwrite") for qd in (1, 16, 64) for nj in (1, 2)]
             + [("read", "1m", 8, 1), ("write", "1m", 8, 1)])
QUICK_WORKLOADS = [("randread", "4k", 64, 1), ("read", "1m", 8, 1), ("write", "1m", 8, 1)]


def wl_name(w):
    rw, bs, qd, nj = w
    return f"{rw} {bs} qd{qd} x{nj}"


def start_all(srv, tmp, image):
    """Fills srv: {(server, transport): Server}."""
    for s in SCHEDS:
        dev = [common.ram_device("d", "1GiB", s)]
        exp = [{"name": "x", "device": "d"}]
        srv[(f"nbdsched-{s}", "unix")] = servers.start_nbdsched(tmp, f"ns-{s}", dev, exp)
        srv[(f"nbdsched-{s}", "tcp")] = servers.start_nbdsched(tmp, f"nt-{s}", dev, exp, tcp=True)
    for tr in TRANSPORTS:
        srv[("nbdkit", tr)] = servers.start_nbdkit_memory(tmp, f"k-{tr}", "1G", tr)
        srv[("nbdkit-t1", tr)] = servers.start_nbdkit_memory(tmp, f"k1-{tr}", "1G", tr, threads=1)
        srv[("qemu-nbd", tr)] = servers.start_qemu_nbd(tmp, f"q-{tr}", image, tr)
        srv[("nbd-server", tr)] = servers.start_nbd_server(tmp, f"n-{tr}", image, tr)


def prefill(srv, keys, size):
    """Writes every export once. The first write into a RAM device's memory
    costs far more than later ones on some hosts (a virtual machine whose
    host returns freed pages: 17-24 ms per 2 MiB huge page here, see
    bench/results/data-path.md), and the servers allocate differently, so
    without it the first write workload measured page faults. --quick
    fills a little of each: it checks that the step works, not speed."""
    fio.run({"thread": True, "rw": "write", "bs": "1m", "iodepth": 8, "size": size},
            [(f"fill{i}", {"ioengine": "nbd", "uri": srv[k].uri("x", k[1]), "stonewall": True})
             for i, k in enumerate(keys)], timeout=60 + 30 * len(keys))


def main():
    a = common.args(__doc__)
    runtime, reps = (0.5, 1) if a.quick else (1, 3)
    workloads = QUICK_WORKLOADS if a.quick else WORKLOADS
    facts = report.Facts()
    image = f"/dev/shm/nbdbench-{os.getpid()}.img"
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    # samples[(server, transport, workload)] = {repetition: (iops, MiB/s, cpu s per 1e6 requests, lat us)}
    samples = {}
    commands = []
    failures = []
    try:
        with TempDir("e6") as tmp, servers.Fleet() as srv:
            start_all(srv, tmp, image)
            keys = list(srv.keys())
            prefill(srv, keys, "16m" if a.quick else "1g")
            for rep in range(reps):
                for w in workloads:
                    rw, bs, qd, nj = w
                    order = keys[rep % len(keys):] + keys[:rep % len(keys)]   # rotate per repetition
                    jobs = []
                    for k in order:
                        jobs.append((f"{k[0]}@{k[1]}", {"ioengine": "nbd", "uri": srv[k].uri("x", k[1]),
                                                         "numjobs": nj, "stonewall": True}))
                    jobs.append(("direct@shm", {"ioengine": "libaio", "filename": image, "numjobs": nj,
                                                "stonewall": True}))
                    g = {"thread": True, "time_based": True, "runtime": f"{int(runtime * 1000)}ms",
                         "ramp_time": "200ms", "randrepeat": 0,
                         "norandommap": True, "rw": rw, "bs": bs, "iodepth": qd}
                    everyone = order + [("direct", "shm")]
                    limit = 60 + 10 * runtime * len(jobs) * nj
                    try:
                        runs = [(fio.run(g, jobs, [srv[k] for k in order], timeout=limit), everyone)]
                    except (fio.FioError, subprocess.TimeoutExpired) as e:
                        # one server hung or failed: run the jobs one by one, lose only its cell
                        print(f"exp6: {wl_name(w)}: batch failed ({str(e)[:200]}); one by one", flush=True)
                        runs = []
                        for job, k in zip(jobs, everyone):
                            try:
                                runs.append((fio.run(g, [job], [srv[k]] if k in srv else [],
                                                     timeout=60 + 10 * runtime * nj), [k]))
                            except (fio.FioError, subprocess.TimeoutExpired) as e2:
                                failures.append(f"{k[0]} over {k[1]}, {wl_name(w)}, repetition {rep + 1}: "
                                                f"{str(e2).splitlines()[0][:160]}")
                    for r, ks in runs:
                        if rep == 0 and len(ks) > 1:
                            commands.append(r.command.replace(tmp, "$TMP").replace(image, "$IMG"))
                        for i, k in enumerate(ks):
                            sm = r.summary(r.job(f"{k[0]}@{k[1]}"))
                            cpu = r.server_cpu[i] if k in srv else None
                            per_m = cpu / sm["ios"] * 1e6 if cpu is not None and sm["ios"] else None
                            samples.setdefault((k[0], k[1], w), {})[rep] = (
                                sm["iops"], sm["bw_mib"], per_m, sm["lat_us"])
                print(f"exp6: repetition {rep + 1}/{reps} done", flush=True)
    finally:
        os.unlink(image)
    med = common.medians({k: list(v.values()) for k, v in samples.items()})
    result = exp6_report.write(NAME, a.quick, facts, med, workloads, reps, runtime, commands, wl_name,
                                failures, samples)
    return result


if __name__ == "__main__":
    main()
