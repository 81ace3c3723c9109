"""Several event loops (limits.threads, docs/threads.md): one daemon per
loop count, each with two RAM devices; two fio processes at once, one per
device (4k random reads over a Unix socket), the daemons interleaved and
their order rotated per repetition. Reports medians of the summed IOPS and
the server's CPU per I/O (/proc/PID/stat, whole run including ramp and
connection set-up), with the load average beside them: the machine may be
shared. Not part of run-all.

  bench/threads_probe.py --binary build-rel/daemon/nbdsched --threads 1,2 \\
      --iodepth 64,1 --reps 3 --runtime 4"""

import argparse
import os
import statistics
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.daemon import Daemon  # noqa: E402
from nbdsched_test.process import cpu_seconds  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402


def one_round(d, qd, runtime, ramp):
    """Two fio processes, one per export, at the same time; (IOPS, server CPU s, ios)."""
    g = {"thread": True, "time_based": True, "runtime": f"{int(runtime * 1000)}ms", "ramp_time": f"{int(ramp * 1000)}ms",
         "randrepeat": 0, "norandommap": True, "rw": "randread", "bs": "4k", "iodepth": qd, "size": "256m"}
    cpu0 = cpu_seconds(d.pid)
    running = [fio.start(g, [(f"x{i}", {"ioengine": "nbd", "uri": d.uri(f"x{i}")})]) for i in (0, 1)]
    results = [r.finish(timeout=runtime + 60) for r in running]
    cpu = cpu_seconds(d.pid) - cpu0
    sums = [r.summary() for r in results]
    return sum(s["iops"] for s in sums), cpu, sum(s["ios"] for s in sums)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default="build/daemon/nbdsched")
    p.add_argument("--threads", default="1,2", help="loop counts to compare")
    p.add_argument("--iodepth", default="64,1")
    p.add_argument("--busy-poll", default="auto", help="limits.busy_poll for every daemon (the daemon's default: auto)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--runtime", type=float, default=4)
    a = p.parse_args()
    fio.require_nbd_engine()
    loads = []
    samples = {}
    with TempDir("threads") as tmp, servers.Fleet() as srv:
        for t in a.threads.split(","):
            cfg = {"devices": [common.ram_device(f"d{i}", "256MiB") for i in (0, 1)],
                   "exports": [{"name": f"x{i}", "device": f"d{i}"} for i in (0, 1)],
                   "limits": {"threads": int(t), "busy_poll": a.busy_poll}, "log_level": "warn"}
            srv[t] = Daemon(cfg, f"t{t}", workdir=tmp, control=False, binary=a.binary)
        keys = list(srv.keys())
        for rep in range(a.reps):
            for qd in a.iodepth.split(","):
                for t in keys[rep % len(keys):] + keys[:rep % len(keys)]:
                    iops, cpu, ios = one_round(srv[t], int(qd), a.runtime, 0.3)
                    samples.setdefault((int(qd), int(t)), []).append((iops, cpu / ios * 1e6 if ios else None))
                    loads.append(os.getloadavg()[0])
            print(f"rep {rep + 1}/{a.reps} done", file=sys.stderr, flush=True)
    print(f"load average (1 min) during the run: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} CPUs")
    print()
    print("| 4k randread, 2 devices x 1 fio | threads | IOPS (sum) | server CPU µs/IO | runs (IOPS) |")
    print("|---|---|---|---|---|")
    for (qd, t), v in sorted(samples.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        med_iops = statistics.median(x[0] for x in v)
        med_cpu = statistics.median(x[1] for x in v if x[1] is not None)
        runs = ", ".join(f"{x[0] / 1000:.1f}k" for x in v)
        print(f"| qd{qd} | {t} | {med_iops:.0f} | {med_cpu:.2f} | {runs} |")


if __name__ == "__main__":
    main()
