"""A focused peers comparison for one change at a time: nbdsched binaries
(label=path, each with its own device options) against nbdkit memory
(16 threads and --threads 1), on a Unix socket and/or TCP; the servers
interleaved with fio `stonewall`, the order rotated per repetition;
medians of IOPS, MB/s and server CPU per I/O. Not part of run-all.

  bench/peers_probe.py --server new=build-rel/daemon/nbdsched \
      --server ra128=build-rel/daemon/nbdsched:read_ahead_kb=128 \
      --workload read,1m,8 --transport unix --reps 3 --runtime 3 --ref new

A file device instead of RAM: device keys, e.g.
  --server file=build-rel/daemon/nbdsched:backend=file:path=/var/tmp/img:direct=true:io_engine=io_uring
with --file /var/tmp/img for fio's own io_uring engine on that file (direct=1,
no protocol: the ceiling) and --qemu-nbd for qemu-nbd --aio=io_uring
--cache=none on it. The table also gives fio's own CPU per I/O (usr + sys).

`--client nbdsched-load` drives each server in turn with tools/load instead
of fio (one connection, no ramp; the tool next to the first --server's
daemon): where fio's own thread is the limit, the server's rate shows
(docs/data-path.md, "A client that is not the limit"); with --file, fio on
the file runs after the servers in each repetition. One A/B of two
daemon builds at qd1 over both transports:
  bench/peers_probe.py --client nbdsched-load --server main=MAIN --server new=NEW \
      --nbdkit "" --prefill --workload randread,4k,1 --reps 5 --runtime 2 --ref main

`devices=N` gives a daemon N RAM devices (exports x, x1, ...; one event loop
each up to limits.threads) and spreads a workload's numjobs over them, one
fio job per connection: what serving one device's connections on several
loops could give at most (docs/threads.md), against the peers in the same run:
  --server one=NEW --server split=NEW:devices=2 --workload randread,4k,1,2"""

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
import peers_run  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.daemon import Daemon  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402


def parse_server(text):
    label, rest = text.split("=", 1)
    path, *opts = rest.split(":")
    dev, top = {}, {}
    for o in opts:
        k, v = o.split("=", 1)
        v = common.option_value(v)
        if k.startswith("top."):   # top.limits.busy_poll=50us
            *keys, last = k[4:].split(".")
            at = top
            for part in keys:
                at = at.setdefault(part, {})
            at[last] = v
        else:
            dev[k] = v
    return label, path, dev, top


def host_busy_seconds():
    """CPU time the whole host has spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")   # all but idle and iowait


def children_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_quiet(limit, give_up_s=300):
    """Waits until the rest of the host uses under `limit` of its CPUs
    (between runs nothing of ours runs); False when it never got quiet."""
    ncpu = os.cpu_count() or 1
    end = time.monotonic() + give_up_s
    while time.monotonic() < end:
        b0 = host_busy_seconds()
        time.sleep(0.5)
        if (host_busy_seconds() - b0) / (0.5 * ncpu) < limit:
            return True
    return False


def quiet_run(limit, tries, g, jobs, servers, wait_s=300):
    """fio.run, redone while other processes used more than `limit` of the
    CPUs during it (busy host time less fio's and the servers'): on a
    shared host a compile in the middle of a run moves it by tens of %.
    Returns the run and whether it stayed quiet."""
    ncpu = os.cpu_count() or 1
    for attempt in range(tries):
        wait_quiet(limit, wait_s)
        b0, c0 = host_busy_seconds(), children_cpu_seconds()
        r = fio.run(g, jobs, servers)
        other = host_busy_seconds() - b0 - (children_cpu_seconds() - c0) - sum(r.server_cpu)
        if other / (r.wall * ncpu) < limit:
            return r, True
        print(f"  run disturbed (other processes {other / (r.wall * ncpu):.0%} of the CPUs), "
              f"{'again' if attempt + 1 < tries else 'kept'}", file=sys.stderr, flush=True)
    return r, False


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", default=[], help="label=path[:key=value...] (device keys; top.a.b=v: daemon-wide a: {b: v})")
    p.add_argument("--workload", action="append", default=[], help="rw,bs,iodepth[,numjobs]")
    p.add_argument("--transport", action="append", default=[])
    p.add_argument("--nbdkit", default="16,1", help="nbdkit thread settings to add (empty: none)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--runtime", type=float, default=3)
    p.add_argument("--prefill", action="store_true", help="write every export once first (reads hit data, not holes)")
    p.add_argument("--ref", action="append", default=[],
                   help="server label to compare the others with, repetition by repetition (a table each; "
                        "fio-io_uring: fio on --file)")
    p.add_argument("--quiet", type=float, default=0,
                   help="wait before each run until other processes use under this share of the CPUs (0.1: 10 %%), "
                        "and redo a run they used more of (up to 3 times); 0: off")
    p.add_argument("--file", help="an image: add fio io_uring direct=1 on it (no protocol) to every run")
    p.add_argument("--qemu-nbd", action="store_true", help="add qemu-nbd --aio=io_uring --cache=none on --file")
    p.add_argument("--json", help="also write every repetition's numbers to this file")
    p.add_argument("--quiet-wait", type=float, default=300, help="seconds to wait for --quiet before each run")
    p.add_argument("--client", choices=["fio", "nbdsched-load"], default="fio",
                   help="the load: fio's nbd engine, or tools/load (no --fio or --quiet with it; --file's fio "
                        "runs after the servers in each repetition)")
    p.add_argument("--fio", action="append", default=[],
                   help="a fio option for every run, key=value or a bare flag (zero_buffers: payloads of zeros)")
    a = p.parse_args()
    if a.qemu_nbd and not a.file:
        p.error("--qemu-nbd serves --file")
    tool = None
    if a.client == "nbdsched-load":
        if a.fio or a.quiet:
            p.error("--client nbdsched-load runs no fio against the servers: no --fio or --quiet")
        if not a.server:
            p.error("--client nbdsched-load finds the tool next to the first --server's daemon")
        tool = peers_run.light_client_path(parse_server(a.server[0])[1])
        if tool is None:
            p.error("no tools/load/nbdsched-load next to the first --server's daemon (build it)")
    transports = a.transport or ["unix", "tcp"]
    samples = {}
    split = {}   # (label, transport) -> devices, for daemons with more than one
    disturbed = 0
    with TempDir("probe") as tmp, servers.Fleet() as srv:
        for tr in transports:
            for text in a.server:
                label, path, dev, top = parse_server(text)
                n = int(dev.pop("devices", 1))
                sched = dev.pop("scheduler", "none")
                names = [export_name(i) for i in range(n)]
                cfg = {"devices": [common.ram_device(f"d{x}", "1GiB", sched, **dev) for x in names],
                       "exports": [{"name": x, "device": f"d{x}"} for x in names], "log_level": "warn", **top}
                split[(label, tr)] = n
                srv[(label, tr)] = Daemon(cfg, f"{label}-{tr}", workdir=tmp, tcp=tr == "tcp", control=False,
                                          binary=path)
            for t in filter(None, a.nbdkit.split(",")):
                s = servers._peer("nbdkit", ["nbdkit", "-f", "--exit-with-parent", "--threads", t], tmp,
                                  f"k{t}-{tr}", tr, lambda x: ["-U", x],
                                  lambda port: ["-i", "127.0.0.1", "-p", str(port)], ["memory", "1G"])
                srv[(f"nbdkit-t{t}", tr)] = s
            if a.qemu_nbd:
                srv[("qemu-nbd-uring", tr)] = servers.start_qemu_nbd(tmp, f"q-{tr}", a.file, tr,
                                                                     extra=["--aio=io_uring", "--cache=none"])
        keys = list(srv.keys())
        if a.prefill:
            fio.run({"thread": True, "rw": "write", "bs": "1m", "iodepth": 8, "size": "1g"},
                    [(f"fill{i}-{e}", {"ioengine": "nbd", "uri": srv[k].uri(export_name(e), k[1]), "stonewall": True})
                     for i, k in enumerate(keys) for e in range(split.get(k, 1))])
        if tool:
            measure_light(srv, a.workload, a.reps, a.runtime, tool, tmp, samples, a.file)
        else:
            for rep in range(a.reps):
                for wtext in a.workload:
                    rw, bs, qd, *nj = wtext.split(",")
                    nj = int(nj[0]) if nj else 1
                    order = keys[rep % len(keys):] + keys[:rep % len(keys)]
                    jobs = [job for k in order for job in server_jobs(k, srv[k], nj, split.get(k, 1))]
                    if a.file:   # no server: its CPU is fio's own
                        jobs.insert(rep % (len(jobs) + 1), file_job(a.file, nj))
                    g = fio_globals(rw, bs, qd, a.runtime, a.fio)
                    if a.quiet:
                        r, calm = quiet_run(a.quiet, 3, g, jobs, [srv[k] for k in order], a.quiet_wait)
                        disturbed += not calm
                    else:
                        r = fio.run(g, jobs, [srv[k] for k in order])
                    for i, k in enumerate(order + ([RAW] if a.file else [])):
                        js = r.job(f"{k[0]}@{k[1]}")
                        sm = r.summary(js)
                        per = r.server_cpu[i] / sm["ios"] * 1e6 if sm["ios"] and i < len(order) else None
                        samples.setdefault((wtext, k[1], k[0]), []).append(
                            (sm["iops"], sm["bw_mib"] * 1.048576, per, fio_cpu_us_per_io(js, sm["ios"])))
                print(f"rep {rep + 1}/{a.reps} done, load average {os.getloadavg()[0]:.2f}", file=sys.stderr,
                      flush=True)
    if a.quiet:
        print(f"runs kept although disturbed: {disturbed}")
    print(f"| workload | transport | server | IOPS | MB/s | server CPU µs/IO (approx, whole run) | {a.client} CPU µs/IO |")
    print("|---|---|---|---|---|---|---|")
    for (w, tr, label), v in sorted(samples.items()):
        med = [statistics.median([x[i] for x in v if x[i] is not None] or [0]) for i in range(4)]
        server_cpu = f"{med[2]:.1f}" if med[2] else "-"   # fio on the file: no server
        print(f"| {w} | {tr} | {label} | {med[0]:.0f} | {med[1]:.0f} | {server_cpu} | {med[3]:.1f} |")
    for ref in a.ref:
        print_paired(samples, ref)
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"workload": w, "transport": tr, "server": label, "reps": v}
                       for (w, tr, label), v in sorted(samples.items())], f, indent=1)


def measure_light(srv, workload_texts, reps, runtime, tool, tmp, samples, image=None):
    """Fills samples as the fio loop does (IOPS, MB/s, server CPU µs/IO,
    client CPU µs/IO), from peers_run.measure_light; with `image`, fio
    io_uring on it (no protocol) after the servers in each repetition, as
    RAW. Only the repetitions every server (and the image) of a workload
    completed are kept, so that the paired ratios pair the same
    repetitions."""
    parsed = {}
    for wtext in workload_texts:
        rw, bs, qd, *nj = wtext.split(",")
        if nj and int(nj[0]) != 1:
            sys.exit("--client nbdsched-load runs one connection: no numjobs")
        parsed[(rw, bs, int(qd), 1)] = wtext
    raw = {}   # (w, rep) -> the tuple of fio on the image

    def on_image(rep, w):
        try:
            r = fio.run(fio_globals(*w[:3], runtime, []), [file_job(image, 1)], timeout=60 + 10 * runtime)
        except (fio.FioError, subprocess.TimeoutExpired) as e:   # the repetition is left out
            print(f"failed: fio on {image}, repetition {rep + 1}: {str(e).splitlines()[0][:160]}", file=sys.stderr)
            return
        sm = r.summary()
        raw[(w, rep)] = (sm["iops"], sm["bw_mib"] * 1.048576, None, fio_cpu_us_per_io(r.jobs, sm["ios"]))
    got, _, failures = peers_run.measure_light(srv, list(parsed), reps, runtime, tool, tmp, "probe",
                                               on_image if image else None)
    for f in failures:
        print(f"failed: {f}", file=sys.stderr)
    for w, wtext in parsed.items():
        cells = {k: got.get((k[0], k[1], w), {}) for k in srv}
        for rep in range(reps):
            if not all(rep in c for c in cells.values()) or (image and (w, rep) not in raw):
                continue
            for k, c in cells.items():
                iops, mib_s, server_us, _, client_us = c[rep]
                samples.setdefault((wtext, k[1], k[0]), []).append((iops, mib_s * 1.048576, server_us, client_us))
            if image:
                samples.setdefault((wtext, RAW[1], RAW[0]), []).append(raw[(w, rep)])


# fio io_uring on --file, without a protocol: (label, transport) in samples.
RAW = ("fio-io_uring", "none")


def file_job(image, numjobs):
    """fio's job on the image: io_uring, O_DIRECT (the ceiling a server is
    measured against)."""
    return (f"{RAW[0]}@{RAW[1]}", {"ioengine": "io_uring", "filename": image, "direct": 1, "invalidate": 0,
                                    "size": "1g", "numjobs": numjobs, "stonewall": True})


def fio_globals(rw, bs, qd, runtime, options):
    """fio's global options for one workload; `options`: --fio's key=value
    or bare flags."""
    g = {"thread": True, "time_based": True, "runtime": f"{int(runtime * 1000)}ms", "ramp_time": "300ms",
         "randrepeat": 0, "norandommap": True, "rw": rw, "bs": bs, "iodepth": int(qd)}
    for o in options:
        k, _, v = o.partition("=")
        g[k] = v if v else True
    return g


def export_name(i):
    return "x" if i == 0 else f"x{i}"


def server_jobs(key, server, numjobs, devices):
    """fio jobs for one server: numjobs connections to export x, or with
    several devices one job per connection spread over them (one name, so
    that they count as one server; only the first starts a new group)."""
    name = f"{key[0]}@{key[1]}"
    if devices == 1:
        return [(name, {"ioengine": "nbd", "uri": server.uri("x", key[1]), "numjobs": numjobs, "stonewall": True})]
    return [(name, {"ioengine": "nbd", "uri": server.uri(export_name(j % devices), key[1]), **({"stonewall": True} if j == 0 else {})})
            for j in range(numjobs)]


def fio_cpu_us_per_io(jobs, ios):
    """fio's own CPU time (usr + sys, its per-job percentages of the job's
    runtime) per I/O: the client's side of the cost."""
    cpu_s = sum((j["usr_cpu"] + j["sys_cpu"]) / 100 * j["job_runtime"] / 1000 for j in jobs)
    return cpu_s / ios * 1e6 if ios else None


def print_paired(samples, ref):
    """IOPS of each server over `ref`'s in the same repetition (the two ran
    back to back, so a slow stretch of a busy host hits both): the median
    ratio and the range. The ratio of two medians hides how far the
    repetitions spread; a range wider than the difference looked for
    decides nothing."""
    print(f"\n| workload | transport | server | IOPS / {ref} (median of the repetitions) | min | max | reps |")
    print("|---|---|---|---|---|---|---|")
    for (w, tr, label), v in sorted(samples.items()):
        base = samples.get((w, tr, ref)) or samples.get((w, "none", ref))   # "none": fio on the file
        if label == ref or not base:
            continue
        ratios = [x[0] / b[0] for x, b in zip(v, base) if b[0]]
        if ratios:
            print(f"| {w} | {tr} | {label} | {statistics.median(ratios):.2f} | {min(ratios):.2f} | {max(ratios):.2f} "
                  f"| {len(ratios)} |")


if __name__ == "__main__":
    main()
