"""The measuring loops shared by the peers experiments (6, 14 and 15): RAM
servers started in one Fleet, every export written once, then per
repetition and workload one fio invocation running every server back to
back (`stonewall`) in an order rotated between repetitions, plus fio on the
/dev/shm file without a protocol as the limit; or (measure_light, 15) the
same rotation with nbdsched-load as the client."""

import json
import os
import subprocess

import common
from nbdsched_test import fio, servers

SCHEDS = ["none", "cfq", "bfq"]
TRANSPORTS = ["unix", "tcp"]


def wl_name(w):
    rw, bs, qd, nj = w
    return f"{rw} {bs} qd{qd} x{nj}"


def wl_parse(name):
    """wl_name's inverse: "randread 4k qd1 x1" -> ("randread", "4k", 1, 1)."""
    rw, bs, qd, nj = name.split()
    return rw, bs, int(qd.removeprefix("qd")), int(nj.removeprefix("x"))


def start(srv, tmp, image, peers=("nbdkit", "nbdkit-t1", "qemu-nbd", "nbd-server")):
    """Fills srv: {(server, transport): Server}: nbdsched with each
    scheduler, and the peers named."""
    for s in SCHEDS:
        dev = [common.ram_device("d", "1GiB", s)]
        exp = [{"name": "x", "device": "d"}]
        srv[(f"nbdsched-{s}", "unix")] = servers.start_nbdsched(tmp, f"ns-{s}", dev, exp)
        srv[(f"nbdsched-{s}", "tcp")] = servers.start_nbdsched(tmp, f"nt-{s}", dev, exp, tcp=True)
    starters = {"nbdkit": lambda tr: servers.start_nbdkit_memory(tmp, f"k-{tr}", "1G", tr),
                "nbdkit-t1": lambda tr: servers.start_nbdkit_memory(tmp, f"k1-{tr}", "1G", tr, threads=1),
                "qemu-nbd": lambda tr: servers.start_qemu_nbd(tmp, f"q-{tr}", image, tr),
                "nbd-server": lambda tr: servers.start_nbd_server(tmp, f"n-{tr}", image, tr)}
    for tr in TRANSPORTS:
        for p in peers:
            srv[(p, tr)] = starters[p](tr)


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


def rotated(keys, rep):
    """The servers' order in repetition `rep`: rotated by one each time, so
    that none always runs first or after the same neighbour."""
    return keys[rep % len(keys):] + keys[:rep % len(keys)]


def load_where(server, transport):
    """nbdsched-load's arguments that reach `server` over `transport`."""
    return ["--unix", server.sock] if transport == "unix" else ["--tcp", f"127.0.0.1:{server.tcp_port}"]


def measure(srv, image, workloads, reps, runtime, tmp, tag):
    """Runs the workloads; returns (samples, commands, failures) with
    samples[(server, transport, workload)] = {repetition: (IOPS, MiB/s,
    server CPU s per 1e6 requests, mean latency µs, fio's own CPU s per 1e6
    requests)}. A fio invocation that fails or hangs is rerun job by job:
    only the failing server's cell of that repetition is lost (listed in
    failures)."""
    keys = list(srv.keys())
    samples, commands, failures = {}, [], []
    for rep in range(reps):
        for w in workloads:
            rw, bs, qd, nj = w
            order = rotated(keys, rep)
            jobs = [(f"{k[0]}@{k[1]}", {"ioengine": "nbd", "uri": srv[k].uri("x", k[1]), "numjobs": nj,
                                        "stonewall": True}) for k in order]
            jobs.append(("direct@shm", {"ioengine": "libaio", "filename": image, "numjobs": nj, "stonewall": True}))
            g = {"thread": True, "time_based": True, "runtime": f"{int(runtime * 1000)}ms",
                 "ramp_time": "200ms", "randrepeat": 0, "norandommap": True, "rw": rw, "bs": bs, "iodepth": qd}
            everyone = order + [("direct", "shm")]
            limit = 60 + 10 * runtime * len(jobs) * nj
            try:
                runs = [(fio.run(g, jobs, [srv[k] for k in order], timeout=limit), everyone)]
            except (fio.FioError, subprocess.TimeoutExpired) as e:
                # one server hung or failed: run the jobs one by one, lose only its cell
                print(f"{tag}: {wl_name(w)}: batch failed ({str(e)[:200]}); one by one", flush=True)
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
                    js = r.job(f"{k[0]}@{k[1]}")
                    sm = r.summary(js)
                    cpu = r.server_cpu[i] if k in srv else None
                    per_m = cpu / sm["ios"] * 1e6 if cpu is not None and sm["ios"] else None
                    client_m = r.client_cpu(js) / sm["ios"] * 1e6 if sm["ios"] else None
                    samples.setdefault((k[0], k[1], w), {})[rep] = (sm["iops"], sm["bw_mib"], per_m, sm["lat_us"],
                                                                     client_m)
        print(f"{tag}: repetition {rep + 1}/{reps} done", flush=True)
    return samples, commands, failures


def light_client_path(daemon=None):
    """nbdsched-load in the build tree of `daemon` (default: NBDSCHED), or None if not built."""
    daemon = daemon or os.environ.get("NBDSCHED", "build/daemon/nbdsched")
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(daemon))), "tools", "load", "nbdsched-load")
    return tool if os.access(tool, os.X_OK) else None


class LoadFailed(Exception):
    """One nbdsched-load run that gave no result, and why."""


def load_argv(tool, server, transport, rw, bs, qd, runtime, seed):
    """nbdsched-load's command line for one run against `server`'s export x."""
    return [tool, *load_where(server, transport), "--export", "x", "--rw", rw, "--bs", bs, "--qd", str(qd),
            "--seconds", str(runtime), "--seed", str(seed)]


def load_once(tool, server, transport, rw, bs, qd, runtime, seed):
    """One nbdsched-load run (load_argv's) against `server`'s export x: (its
    JSON result, the server's CPU seconds over the run). Raises LoadFailed."""
    argv = load_argv(tool, server, transport, rw, bs, qd, runtime, seed)
    cpu0 = server.cpu()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=60 + 10 * runtime)
    except subprocess.TimeoutExpired:   # its own stall timeout (30 s) did not fire: lose the cell
        raise LoadFailed(f"killed after {60 + 10 * runtime:.0f} s") from None
    cpu = server.cpu() - cpu0
    if p.returncode != 0 or not p.stdout.strip():
        raise LoadFailed((p.stderr.strip() or f"exit {p.returncode}")[:160])
    return json.loads(p.stdout), cpu


def measure_light(srv, workloads, reps, runtime, tool, tmp, tag, beside=None):
    """measure() with nbdsched-load as the client instead of fio: per
    repetition and workload each server in turn (the order rotated between
    repetitions), one connection, the same samples' tuples (mean latency:
    the queue depth over the rate, by Little's law); then beside(rep, w),
    if given (fio on a file without a protocol, the ceiling), in the same
    repetition. Returns (samples, commands, failures)."""
    keys = list(srv.keys())
    samples, commands, failures = {}, [], []
    for rep in range(reps):
        for w in workloads:
            rw, bs, qd, nj = w
            for k in rotated(keys, rep):
                run = (tool, srv[k], k[1], rw, bs, qd, runtime, rep + 1)
                if rep == 0:
                    commands.append(" ".join(["nbdsched-load", *load_argv(*run)[1:]]).replace(tmp, "$TMP"))
                try:
                    r, cpu = load_once(*run)
                except LoadFailed as e:
                    failures.append(f"{k[0]} over {k[1]}, {wl_name(w)}, repetition {rep + 1}: {e}")
                    continue
                n = r["requests"]
                samples.setdefault((k[0], k[1], w), {})[rep] = (
                    r["iops"], r["mib_s"], cpu / n * 1e6 if n else None, qd / r["iops"] * 1e6 if r["iops"] else None,
                    r["cpu_s"] / n * 1e6 if n else None)
            if beside:
                beside(rep, w)
        print(f"{tag}: repetition {rep + 1}/{reps} done", flush=True)
    return samples, commands, failures

