"""Experiment 8, how the file backend does its I/O: nbdsched's two engines,
`io_engine: io_uring` (one ring on the device's event loop) and
`io_engine: threads` (positional reads and writes, pread/pwrite/fdatasync,
on a pool of `io_threads` threads), against the same server with both
designs -- qemu-nbd `--aio=threads` and `--aio=io_uring` -- and nbdkit's
file plugin (a thread pool too), with fio's io_uring and libaio engines
directly on the file (no protocol) as the limit.

One 1 GiB image on the root filesystem (a virtio disk) serves every
server. Buffered: the image is written first, so reads come from the page
cache and only the server's I/O path is measured. O_DIRECT (nbdsched
`direct: true`, qemu-nbd `--cache=none`, fio `direct=1`): reads go to the
disk. All servers run all the time; one fio invocation per workload and
repetition runs them back to back (`stonewall`) in an order rotated
between repetitions."""

import os
import subprocess
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp8-file-io"
URING = "nbdsched io_uring"
RAW = ["fio io_uring (no protocol)", "fio libaio (no protocol)"]
THREADS = [1, 4, 16, 64]
# (rw, bs, iodepth, direct)
WORKLOADS = [("randread", "4k", 1, False), ("randread", "4k", 64, False), ("randwrite", "4k", 64, False),
             ("read", "1m", 8, False), ("randread", "4k", 1, True), ("randread", "4k", 64, True)]
QUICK_WORKLOADS = [("randread", "4k", 64, False), ("randread", "4k", 64, True)]


def wl_name(w):
    rw, bs, qd, direct = w
    return f"{rw} {bs} qd{qd} {'O_DIRECT' if direct else 'buffered'}"


def nbdsched_device(image, direct, engine):
    return [{"name": "d", "backend": "file", "path": image, "size": "1GiB", "direct": direct,
             "scheduler": "none", "io_engine": engine}]


def start_all(srv, tmp, image, direct, threads):
    """Fills srv: {label: Server} for one caching mode."""
    srv[URING] = servers.start_nbdsched(tmp, f"u{int(direct)}", nbdsched_device(image, direct, "io_uring"),
                                        [{"name": "x", "device": "d"}])
    for n in threads:
        srv[f"nbdsched t={n}"] = servers.start_nbdsched(tmp, f"n{n}{int(direct)}",
                                                         nbdsched_device(image, direct, "threads"),
                                                         [{"name": "x", "device": "d"}],
                                                         limits={"io_threads": n})
    for aio in ("threads", "io_uring"):
        extra = ["--aio=" + aio] + (["--cache=none"] if direct else [])
        srv[f"qemu-nbd {aio}"] = servers.start_qemu_nbd(tmp, f"q{aio}{int(direct)}", image, extra=extra)
    if not direct:   # nbdkit 1.32's file plugin has no O_DIRECT mode
        srv["nbdkit file"] = servers.start_nbdkit_file(tmp, "kf", image)


def measure(srv, image, w, runtime, rep):
    """One fio run of workload w over every server (rotated by rep) plus fio
    on the file; returns {label: (iops, MiB/s, server cpu us per request)}."""
    rw, bs, qd, direct = w
    labels = list(srv.keys())
    labels = labels[rep % len(labels):] + labels[:rep % len(labels)]
    jobs = [(lab.replace(" ", "_"), {"ioengine": "nbd", "uri": srv[lab].uri("x"), "stonewall": True})
            for lab in labels]
    # invalidate=0: fio drops a file's page cache before a job by default,
    # which would leave the next buffered run reading from the disk.
    for engine in ("io_uring", "libaio"):
        jobs.append((f"fio_{engine}", {"ioengine": engine, "filename": image, "direct": int(direct),
                                       "invalidate": 0, "stonewall": True}))
    g = {"thread": True, "time_based": True, "runtime": f"{int(runtime * 1000)}ms", "randrepeat": 0,
         "norandommap": True, "rw": rw, "bs": bs, "iodepth": qd, "size": "1g"}
    r = fio.run(g, jobs, [srv[lab] for lab in labels], timeout=60 + 10 * runtime * len(jobs))
    out = {}
    for i, lab in enumerate(labels + RAW):
        sm = r.summary(r.job(jobs[i][0]))
        cpu = r.server_cpu[i] / sm["ios"] * 1e6 if i < len(labels) and sm["ios"] else None
        out[lab] = (sm["iops"], sm["bw_mib"], cpu)
    return out, r.command


def fmt(m, w, base):
    if m is None:
        return "-"
    v = m[1] if w[1] == "1m" else m[0]
    b = (base[1] if w[1] == "1m" else base[0]) if base else None
    s = f"{v:,.0f}"
    if b:
        s += f" ({v / b:.2f})"
    if m[2] is not None:
        s += f", {m[2]:.0f} us"
    return s


def main():
    a = common.args(__doc__)
    runtime, reps = (0.5, 1) if a.quick else (2, 3)
    workloads = QUICK_WORKLOADS if a.quick else WORKLOADS
    threads = [1, 16] if a.quick else THREADS
    facts = report.Facts()
    image = f"/var/tmp/nbdbench-{os.getpid()}.img"
    subprocess.run(["dd", "if=/dev/urandom", f"of={image}", "bs=1M", "count=1024", "status=none"], check=True)
    samples = {}
    commands = []
    try:
        with TempDir("e8") as tmp:
            for direct in (False, True):
                mine = [w for w in workloads if w[3] == direct]
                if not mine:
                    continue
                with servers.Fleet() as srv:
                    start_all(srv, tmp, image, direct, threads)
                    for rep in range(reps):
                        for w in mine:
                            out, cmd = measure(srv, image, w, runtime, rep)
                            if rep == 0:
                                commands.append(cmd.replace(tmp, "$TMP").replace(image, "$IMG"))
                            for lab, m in out.items():
                                samples.setdefault((lab, w), {})[rep] = m
                        print(f"exp8: {'O_DIRECT' if direct else 'buffered'} repetition {rep + 1}/{reps} done",
                              flush=True)
    finally:
        os.unlink(image)
    med = common.medians({k: list(v.values()) for k, v in samples.items()})
    return write(a.quick, facts, med, workloads, threads, runtime, reps, commands, samples)


def paired(samples, a, b, w):
    """a's IOPS over b's on workload w: the median of the repetitions'
    ratios (both ran in the same fio invocation), None without a pair."""
    num, den = ({rep: m[0] for rep, m in samples.get((lab, w), {}).items()} for lab in (a, b))
    return common.ratio_by_rep(num, den)


def write(quick, facts, med, workloads, threads, runtime, reps, commands, samples):
    """med: {(label, workload): medians}; samples: {(label, workload):
    {repetition: numbers}}, which the verdict's ratios pair."""
    labels = [URING] + [f"nbdsched t={n}" for n in threads] + ["qemu-nbd threads", "qemu-nbd io_uring",
                                                               "nbdkit file"] + RAW
    rows = []
    for w in workloads:
        base = med.get(("qemu-nbd io_uring", w))
        rows.append([wl_name(w) + (" (MiB/s)" if w[1] == "1m" else "")] +
                    [fmt(med.get((lab, w)), w, base) for lab in labels])
    sections = [(None, __doc__.strip()),
                ("IOPS (median of the repetitions; in brackets: ratio to qemu-nbd `--aio=io_uring`; "
                 "then the server's CPU time per request)", report.table(["workload"] + labels, rows) +
                 "\n\n`nbdsched io_uring` is `io_engine: io_uring` (default `io_threads`); `t=N` is "
                 "`io_engine: threads` with `limits.io_threads: N`. \"-\": that server has no such mode."
                 " Unix socket everywhere; one connection, scheduler `none`.")]
    verdict = []
    summary = {}
    # The product target: the default engine (io_uring), 4k randread qd64
    # O_DIRECT, at least 0.9x of fio io_uring on the same file, same run.
    wd = ("randread", "4k", 64, True)
    ours_d, raw_d, aio_d = med.get((URING, wd)), med.get((RAW[0], wd)), med.get((RAW[1], wd))
    pool_d = med.get(("nbdsched t=16", wd))
    direct_vs_raw = paired(samples, URING, RAW[0], wd)
    if ours_d and raw_d and direct_vs_raw is not None:
        summary["direct_vs_raw"] = direct_vs_raw
        pool_vs_raw = paired(samples, "nbdsched t=16", RAW[0], wd)
        verdict.append(f"Target, 4k randread qd64 O_DIRECT: nbdsched io_uring {ours_d[0]:,.0f} IOPS against fio "
                       f"io_uring on the same file with no protocol {raw_d[0]:,.0f} "
                       f"({direct_vs_raw:.2f}x, the median of the repetitions' ratios; target 0.9x)"
                       + (f", fio libaio {aio_d[0]:,.0f}" if aio_d else "")
                       + (f"; the thread pool (16 threads) {pool_d[0]:,.0f} ({pool_vs_raw:.2f}x)"
                          if pool_d and pool_vs_raw is not None else "") + ".")
    ud = med.get(("qemu-nbd io_uring", wd))
    direct_vs_uring = paired(samples, URING, "qemu-nbd io_uring", wd)
    if ours_d and ud and direct_vs_uring is not None:
        summary["direct_vs_uring"] = direct_vs_uring
        verdict.append(f"Against qemu-nbd `--aio=io_uring --cache=none` ({ud[0]:,.0f} IOPS): "
                       f"{direct_vs_uring:.2f}x.")
    w = ("randread", "4k", 64, False)
    ours, pool, uring = med.get((URING, w)), med.get(("nbdsched t=16", w)), med.get(("qemu-nbd io_uring", w))
    vs_uring = paired(samples, URING, "qemu-nbd io_uring", w)
    if ours and pool and uring and vs_uring is not None:
        summary["vs_uring"] = vs_uring
        verdict.append(f"4k randread qd64 from the page cache: nbdsched io_uring {ours[0]:,.0f} IOPS, thread pool "
                       f"(16 threads) {pool[0]:,.0f}, qemu-nbd io_uring {uring[0]:,.0f} "
                       f"({vs_uring:.2f}x ours to theirs).")
    for wl in workloads:
        a_, b_ = med.get((URING, wl)), med.get(("nbdsched t=16", wl))
        if a_ and b_ and a_[2] and b_[2]:
            verdict.append(f"{wl_name(wl)}: server CPU per request io_uring {a_[2]:.0f} us, "
                           f"threads {b_[2]:.0f} us.")
    sections.append(("Verdict", "\n\n".join(verdict) or "no verdict: cells missing"))
    sections.append(("Method", f"{reps} repetitions of {runtime} s per job. Image: 1 GiB of random data in "
                     "/var/tmp. nbdsched `backend: file`, `scheduler: none`; qemu-nbd `-f raw --shared=64`; "
                     "nbdkit `file` plugin (default 16 threads). fio: `--ioengine=nbd` for the servers, "
                     "`--ioengine=io_uring` and `--ioengine=libaio` on the image as the no-protocol rows. "
                     "Every job runs in the same fio invocation, one after the other (`stonewall`), so the "
                     "ratios compare runs seconds apart; the machine's load average is in the table below."))
    series = []
    for lab in labels:
        vals = []
        for wl in workloads:
            m, b = med.get((lab, wl)), med.get(("qemu-nbd io_uring", wl))
            i = 1 if wl[1] == "1m" else 0
            vals.append(m[i] / b[i] if m and b and b[i] else 0)
        series.append((lab, vals))
    report.bars(report.plot_path(NAME, quick), "File backends: throughput relative to qemu-nbd io_uring (=1)",
                [wl_name(x) for x in workloads], series, "ratio to qemu-nbd --aio=io_uring")
    ok = summary.get("direct_vs_raw", 0) >= 0.9

    def x(key):
        return f"{summary[key]:.2f}x" if key in summary else "no result"
    print(report.write(NAME, "Experiment 8: file backend I/O, io_uring vs thread pool", sections, facts,
                       commands, peers=True, quick=quick,
                       summary={"setup": "file image, nbdsched io_uring and io_threads 1..64 vs qemu-nbd "
                                         "threads/io_uring vs nbdkit file vs fio io_uring/libaio on the file, "
                                         "buffered + O_DIRECT",
                                "seed": "-",
                                "ours": f"4k randread qd64 O_DIRECT: {x('direct_vs_raw')} fio "
                                        f"io_uring on the file; {x('direct_vs_uring')} qemu-nbd io_uring",
                                "target": ">= 0.9x fio io_uring on the same file (O_DIRECT 4k randread qd64)",
                                "status": "no result" if "direct_vs_raw" not in summary else
                                          "met" if ok else "missed"},
                       runs={f"{lab} {wl_name(wl)}": [
                           dict(zip(("repetition", "iops", "mib_s", "cpu_us_per_request"),
                                    (rep + 1, *(None if v is None else round(v, 2) for v in m))))
                           for rep, m in sorted(by_rep.items())] for (lab, wl), by_rep in samples.items()}))
    return summary


if __name__ == "__main__":
    main()
