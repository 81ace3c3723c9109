"""Experiment 8, how the file backend does its I/O: nbdsched's two engines,
`io_engine: io_uring` (one ring on the device's event loop) and
`io_engine: threads` (positional reads and writes, pread/pwrite/fdatasync,
on a pool of `io_threads` threads), against the same server with both
designs -- qemu-nbd `--aio=threads` and `--aio=io_uring` -- and nbdkit's
file plugin (a thread pool too), with fio's io_uring and libaio engines
directly on the file (no protocol) as the limit: with fio's defaults (one
request per system call, what the target names), and io_uring with
batched submissions (16 requests a call), what the file allows when fio's
own CPU is not the limit.

One 1 GiB image on the root filesystem (a virtio disk) serves every
server. Buffered: the image is written first, so reads come from the page
cache and only the server's I/O path is measured. O_DIRECT (nbdsched
`direct: true`, qemu-nbd `--cache=none`, fio `direct=1`): reads go to the
disk. All servers run all the time; one fio invocation per workload and
repetition runs them back to back (`stonewall`) in an order rotated
between repetitions.

Beside it, for the target cell (4k randread qd64 O_DIRECT), where the CPU
of an I/O goes: nbdsched io_uring (driven by fio's nbd engine, then by
nbdsched-load, a client that costs little per request) and fio io_uring
on the file (defaults, then batched) each run alone, with the client's
CPU (fio's job thread: its nbd engine, libnbd; for fio on the file, all
of the I/O; nbdsched-load's own), the server's (/proc/PID/stat) and the
whole host's busy time (/proc/stat: user, system, irq and softirq, not
idle, iowait or steal), which also holds the disk's interrupts where they
hit an idle CPU, kernel threads and anything else running on the host."""

import os
import statistics
import subprocess
import sys
import time

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import peers_run  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp8-file-io"
URING = "nbdsched io_uring"
# The same server driven by nbdsched-load (tools/load), a client whose own
# cost per request is small, where fio's nbd engine is one thread at its
# limit: docs/data-path.md, "A client that is not the limit".
LIGHT = "nbdsched io_uring, nbdsched-load client"
RAW = ["fio io_uring (no protocol)", "fio libaio (no protocol)", "fio io_uring batched (no protocol)"]
# What each RAW label runs on the file: (engine, batched). The target names
# fio's defaults (one io_uring_enter per request submitted); batched hands
# up to 16 requests to the kernel a system call and reaps up to the depth,
# as a server that batches does: what the file itself allows.
RAW_JOBS = dict(zip(RAW, [("io_uring", False), ("libaio", False), ("io_uring", True)]))
THREADS = [1, 4, 16, 64]
# (rw, bs, iodepth, direct)
WORKLOADS = [("randread", "4k", 1, False), ("randread", "4k", 64, False), ("randwrite", "4k", 64, False),
             ("read", "1m", 8, False), ("randread", "4k", 1, True), ("randread", "4k", 64, True)]
QUICK_WORKLOADS = [("randread", "4k", 64, False), ("randread", "4k", 64, True)]
# The product target: the default engine (io_uring), 4k randread qd64
# O_DIRECT, at least 0.9x of fio io_uring on the same file, same run.
TARGET = ("randread", "4k", 64, True)


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


def client_cpu_us(jobs, ios):
    """fio's own CPU per I/O: its job threads' usr + sys (percentages of the
    job's runtime; --thread, so each job's own thread): the client's side."""
    cpu_s = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000 for j in jobs)
    return cpu_s / ios * 1e6 if ios else None


def host_cpu_seconds():
    """(busy, interrupts): CPU time the host's CPUs have been busy since boot
    (/proc/stat: user, nice, system, irq, softirq; not idle, iowait nor
    steal, the time the hypervisor gave to others), and the part of it in
    hard and soft interrupts (sampled at the tick: this kernel has no
    IRQ_TIME_ACCOUNTING)."""
    with open("/proc/stat") as f:
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in f.readline().split()[1:8])
    tck = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tck, (irq + softirq) / tck


def host_per_io(before, after, wall, iops):
    """host_cpu_seconds() taken before and after a run of `wall` seconds at
    `iops`: {host, interrupts} in µs per I/O at that rate (None without a rate)."""
    if not iops:
        return {"host": None, "interrupts": None}
    return {"host": (after[0] - before[0]) / wall / iops * 1e6,
            "interrupts": (after[1] - before[1]) / wall / iops * 1e6}


def fio_options(w, runtime):
    rw, bs, qd, _ = w
    return {"thread": True, "time_based": True, "runtime": f"{int(runtime * 1000)}ms", "randrepeat": 0,
            "norandommap": True, "rw": rw, "bs": bs, "iodepth": qd, "size": "1g"}


def raw_job(label, image, w):
    """fio job for RAW label `label` on the image, workload w."""
    engine, batched = RAW_JOBS[label]
    # invalidate=0: fio drops a file's page cache before a job by default,
    # which would leave the next buffered run reading from the disk.
    opts = {"ioengine": engine, "filename": image, "direct": int(w[3]), "invalidate": 0, "stonewall": True}
    if batched:
        opts |= {"iodepth_batch_submit": min(16, w[2]), "iodepth_batch_complete_max": w[2]}
    return (f"fio_{engine}{'_batched' if batched else ''}", opts)


# Where the CPU of an I/O goes: measured for these, each alone in its run.
CPU_LABELS = [URING, LIGHT, RAW[0], RAW[2]]


def light_run(srv, w, runtime, rep, tool):
    """nbdsched-load against nbdsched io_uring, alone: account_cpu's numbers."""
    rw, bs, qd, _ = w
    before, t0 = host_cpu_seconds(), time.monotonic()
    r, cpu = peers_run.load_once(tool, srv[URING], "unix", rw, bs, qd, runtime, rep + 1)
    wall, after = time.monotonic() - t0, host_cpu_seconds()
    n, iops = r["requests"], r["iops"]
    if not n or not iops:
        return None
    return {"iops": iops, "client": r["cpu_s"] / n * 1e6, "server": cpu / n * 1e6,
            **host_per_io(before, after, wall, iops)}


def account_cpu(srv, image, w, runtime, rep, tool):
    """nbdsched io_uring (fio's nbd engine, then nbdsched-load when `tool` is
    built), then fio io_uring on the file, each alone in one run: {label:
    {iops, client, server, host (us per I/O)}}. The host's busy time covers
    the client's start and exit too (a few ms of a run of seconds)."""
    out = {}
    for lab in CPU_LABELS:
        if lab == LIGHT:
            if tool is not None:
                try:
                    m = light_run(srv, w, runtime, rep, tool)
                except peers_run.LoadFailed as e:
                    print(f"exp8: nbdsched-load failed in repetition {rep + 1}: {e}", flush=True)
                    m = None
                if m:
                    out[lab] = m
            continue
        if lab == URING:
            job, pids = (lab.replace(" ", "_"), {"ioengine": "nbd", "uri": srv[lab].uri("x")}), [srv[lab]]
        else:
            job, pids = raw_job(lab, image, w), []
        before = host_cpu_seconds()
        r = fio.run(fio_options(w, runtime), [job], pids, timeout=60 + 10 * runtime)
        after = host_cpu_seconds()
        sm = r.summary()
        ios = sm["ios"]
        if not ios:
            continue
        # The host's busy seconds are over fio's whole life (r.wall): per I/O
        # at the rate fio measured.
        out[lab] = {"iops": sm["iops"], "client": client_cpu_us(r.jobs, ios),
                    "server": r.server_cpu[0] / ios * 1e6 if pids else 0.0,
                    **host_per_io(before, after, r.wall, sm["iops"])}
    return out


def measure(srv, image, w, runtime, rep):
    """One fio run of workload w over every server (rotated by rep) plus fio
    on the file; returns {label: (iops, MiB/s, server cpu us per request,
    client (fio) cpu us per request)}."""
    labels = list(srv.keys())
    labels = labels[rep % len(labels):] + labels[:rep % len(labels)]
    jobs = [(lab.replace(" ", "_"), {"ioengine": "nbd", "uri": srv[lab].uri("x"), "stonewall": True})
            for lab in labels]
    jobs += [raw_job(lab, image, w) for lab in RAW]
    r = fio.run(fio_options(w, runtime), jobs, [srv[lab] for lab in labels], timeout=60 + 10 * runtime * len(jobs))
    out = {}
    for i, lab in enumerate(labels + RAW):
        js = r.job(jobs[i][0])
        sm = r.summary(js)
        cpu = r.server_cpu[i] / sm["ios"] * 1e6 if i < len(labels) and sm["ios"] else None
        out[lab] = (sm["iops"], sm["bw_mib"], cpu, client_cpu_us(js, sm["ios"]))
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
    tool = peers_run.light_client_path()
    if tool is None:
        print("exp8: no nbdsched-load next to the daemon (tools/load in its build tree): "
              "its row of the CPU table is left out", flush=True)
    image = f"/var/tmp/nbdbench-{os.getpid()}.img"
    subprocess.run(["dd", "if=/dev/urandom", f"of={image}", "bs=1M", "count=1024", "status=none"], check=True)
    samples = {}
    cpu = {}   # {label: {repetition: account_cpu's numbers}}
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
                            if w == TARGET:
                                for lab, m in account_cpu(srv, image, w, runtime, rep, tool).items():
                                    cpu.setdefault(lab, {})[rep] = m
                        print(f"exp8: {'O_DIRECT' if direct else 'buffered'} repetition {rep + 1}/{reps} done",
                              flush=True)
    finally:
        os.unlink(image)
    med = common.medians({k: list(v.values()) for k, v in samples.items()})
    return write(a.quick, facts, med, workloads, threads, runtime, reps, commands, samples, cpu)


def paired(samples, a, b, w):
    """a's IOPS over b's on workload w: the median of the repetitions'
    ratios (both ran in the same fio invocation), None without a pair."""
    num, den = ({rep: m[0] for rep, m in samples.get((lab, w), {}).items()} for lab in (a, b))
    return common.ratio_by_rep(num, den)


def light_vs_raw(cpu, raw=RAW[0]):
    """nbdsched-load's IOPS through nbdsched over fio's on the file (`raw`:
    a RAW label), each alone: the median of the repetitions' ratios, or None."""
    num, den = ({rep: m["iops"] for rep, m in cpu.get(lab, {}).items()} for lab in (LIGHT, raw))
    return common.ratio_by_rep(num, den)


def cpu_section(cpu):
    """Where the CPU of an I/O goes in the target cell, and what 0.9x of fio
    on the file would leave per I/O; cpu: {label: {repetition: account_cpu
    numbers}}."""
    med = {lab: {k: statistics.median(r[k] for r in runs.values()) for k in next(iter(runs.values()))}
           for lab, runs in cpu.items() if runs}
    if URING not in med or RAW[0] not in med:
        return "no result: a run missing"
    rows = []
    for lab in (x for x in CPU_LABELS if x in med):
        m = med[lab]
        ours = m["client"] + m["server"]
        rows.append([lab, f"{m['iops']:,.0f}", f"{m['client']:.1f}",
                     f"{m['server']:.1f}" if lab not in RAW else "- (no server)", f"{m['interrupts']:.1f}",
                     f"{ours:.1f}", f"{m['iops'] * m['client'] / 1e6:.2f}", f"{m['iops'] * ours / 1e6:.2f}",
                     f"{m['host']:.1f}", f"{m['iops'] * m['host'] / 1e6:.2f}",
                     f"{m['iops'] * (m['host'] - ours) / 1e6:.2f}"])
    ncpu = os.cpu_count() or 1
    ours, raw = med[URING], med[RAW[0]]
    both = ours["client"] + ours["server"]
    goal = 0.9 * raw["iops"]
    text = report.table(["what (alone in its run)", "IOPS", "client µs/I/O", "server µs/I/O",
                         "host's interrupts µs/I/O", "client + server µs/I/O", "client's CPUs (IOPS x client / 1e6)",
                         "client + server CPUs", "whole host µs/I/O", "whole host CPUs busy", "of which the rest"],
                        rows)
    text += ("\n\nMedians of the repetitions. Client: fio's job thread (usr + sys from fio; the nbd engine and "
             "libnbd for nbdsched, all of the I/O for fio on the file), or nbdsched-load's own CPU time (its "
             "getrusage). Server: the daemon's /proc/PID/stat. "
             "Host's interrupts: the hard and soft interrupt time of /proc/stat (sampled at the "
             "timer tick) per I/O, the disk's completions and the sockets' wake-ups, part of which the kernel "
             "also counts in the process it interrupted. Whole host: /proc/stat busy time over the run (user, "
             "system, irq, softirq) divided by the "
             "I/Os: the two processes, the disk's interrupts and completions where they hit an otherwise idle "
             "CPU, kernel threads, and anything else that ran on the host; \"the rest\" is that minus client "
             "and server, in CPUs. Where the rest is large, other work shared the host and the whole-host "
             "figure is not the I/O's cost; client + server is then the measured cost of an I/O.\n\n"
             f"The arithmetic of the target: 0.9x of fio on the file ({raw['iops']:,.0f} IOPS in these runs) is "
             f"{goal:,.0f} IOPS. On {ncpu} CPUs that leaves {ncpu * 1e6 / goal:.1f} µs of CPU per I/O for client, "
             f"server and the disk's interrupt work together, and {1e6 / goal:.1f} µs for the client, which is one "
             f"fio thread and so runs on one CPU at a time. Through nbdsched with fio's nbd engine an I/O cost "
             f"{both:.1f} µs (client "
             f"{ours['client']:.1f}, server {ours['server']:.1f}; interrupts {ours['interrupts']:.1f} more at most): "
             f"{ncpu} CPUs would allow at most "
             f"{ncpu * 1e6 / both:,.0f} IOPS ({ncpu * 1e6 / both / raw['iops']:.2f}x of fio on the file) before "
             f"any interrupt work, and the client's one thread at most {1e6 / ours['client']:,.0f} "
             f"({1e6 / ours['client'] / raw['iops']:.2f}x) with a server that cost nothing. fio on the file "
             f"spends {raw['client']:.1f} µs of its one thread per I/O (interrupts {raw['interrupts']:.1f}). The "
             f"client and server used {ours['iops'] * both / 1e6:.2f} of the {ncpu} CPUs: "
             + ("the CPUs are the limit." if ours["iops"] * both / 1e6 > 0.8 * ncpu else
                "fio's client thread was busy {:.0%} of the time: the client is the limit.".format(
                    ours["iops"] * ours["client"] / 1e6) if ours["iops"] * ours["client"] / 1e6 > 0.8 else
                "the CPUs were not the limit in these runs; waiting was (on the disk, or for CPUs other "
                "work held)."))
    light, ratio = med.get(LIGHT), light_vs_raw(cpu)
    if light and ratio is not None:
        text += (f"\n\nWith a client that is not the limit (nbdsched-load: {light['client']:.1f} µs of its CPU "
                 f"per I/O) the same daemon and device served {light['iops']:,.0f} IOPS, {ratio:.2f}x of fio "
                 f"io_uring on the file (the median of the repetitions' ratios), spending {light['server']:.1f} µs "
                 f"of its CPU per I/O where it spent {ours['server']:.1f} under fio's client: a client that "
                 "sends many requests a system call lets the daemon take many a turn and hand them to the "
                 "ring together.")
    batched, ratio_b = med.get(RAW[2]), light_vs_raw(cpu, RAW[2])
    if light and batched and ratio_b is not None:
        text += (f" fio io_uring with batched submissions on the file (no protocol) reached {batched['iops']:,.0f} "
                 f"IOPS at {batched['client']:.1f} µs of its thread per I/O: what the file and disk allow when "
                 f"fio's own CPU is not the limit; nbdsched with nbdsched-load made {ratio_b:.2f}x of that.")
    return text


def write(quick, facts, med, workloads, threads, runtime, reps, commands, samples, cpu):
    """med: {(label, workload): medians}; samples: {(label, workload):
    {repetition: numbers}}, which the verdict's ratios pair; cpu: {label:
    {repetition: account_cpu's numbers}} for the target cell."""
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
    wd = TARGET
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
    light = light_vs_raw(cpu)
    if light is not None:
        summary["light_vs_raw"] = light
        batched = light_vs_raw(cpu, RAW[2])
        if batched is not None:
            summary["light_vs_batched"] = batched
        verdict.append(f"With nbdsched-load as the client instead of fio's nbd engine (each alone, after each "
                       f"repetition): {light:.2f}x fio io_uring on the file"
                       + (f", {batched:.2f}x of fio io_uring with batched submissions" if batched is not None
                          else "") + "; the table below has both.")
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
    if cpu:
        sections.append(("Where the CPU of an I/O goes (4k randread qd64 O_DIRECT)", cpu_section(cpu)))
    sections.append(("Method", f"{reps} repetitions of {runtime} s per job. Image: 1 GiB of random data in "
                     "/var/tmp. nbdsched `backend: file`, `scheduler: none`; qemu-nbd `-f raw --shared=64`; "
                     "nbdkit `file` plugin (default 16 threads). fio: `--ioengine=nbd` for the servers, "
                     "`--ioengine=io_uring` and `--ioengine=libaio` on the image as the no-protocol rows. "
                     "Every job runs in the same fio invocation, one after the other (`stonewall`), so the "
                     "ratios compare runs seconds apart; the machine's load average is in the table below. After "
                     "each repetition of the target cell, nbdsched io_uring (with fio's nbd engine, then with "
                     "nbdsched-load, one connection over the Unix socket) and fio io_uring on the file run once "
                     "more, each alone, for the CPU table (the host's busy time cannot be split between jobs of "
                     "one invocation)."))
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
    ok = max(summary.get("direct_vs_raw", 0), summary.get("light_vs_raw", 0)) >= 0.9

    def x(key):
        return f"{summary[key]:.2f}x" if key in summary else "no result"
    print(report.write(NAME, "Experiment 8: file backend I/O, io_uring vs thread pool", sections, facts,
                       commands, peers=True, quick=quick,
                       summary={"setup": "file image, nbdsched io_uring and io_threads 1..64 vs qemu-nbd "
                                         "threads/io_uring vs nbdkit file vs fio io_uring/libaio/io_uring "
                                         "batched on the file, buffered + O_DIRECT",
                                "seed": "-",
                                "ours": f"4k randread qd64 O_DIRECT: {x('light_vs_raw')} fio io_uring on "
                                        f"the file with nbdsched-load as the client ({x('light_vs_batched')} of "
                                        f"fio with batched submissions), {x('direct_vs_raw')} with fio's nbd "
                                        f"engine as the client; {x('direct_vs_uring')} qemu-nbd io_uring",
                                "target": ">= 0.9x fio io_uring on the same file (O_DIRECT 4k randread qd64)",
                                "status": "no result" if "direct_vs_raw" not in summary else
                                          "met" if ok else "missed"},
                       runs={f"{lab} {wl_name(wl)}": [
                           dict(zip(("repetition", "iops", "mib_s", "cpu_us_per_request", "client_cpu_us_per_request"),
                                    (rep + 1, *(None if v is None else round(v, 2) for v in m))))
                           for rep, m in sorted(by_rep.items())] for (lab, wl), by_rep in samples.items()}
                       | {f"{lab} {wl_name(TARGET)} alone (CPU per I/O, us)": [
                           {"repetition": rep + 1} | {k: round(v, 2) for k, v in m.items()}
                           for rep, m in sorted(runs.items())] for lab, runs in cpu.items()}))
    return summary


if __name__ == "__main__":
    main()
