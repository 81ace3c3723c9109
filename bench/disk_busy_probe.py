#!/usr/bin/env python3
"""How busy the disk under a file device is while nbdsched serves the
target cell (4k randread qd64 O_DIRECT), beside fio io_uring on the same
image. Each job runs alone, in its own fio invocation, so the disk's own
counters belong to it: /sys/block/$DISK/stat (default vda) gives its busy
time, reads/s, average queue (time_in_queue) and read latency, and
/sys/block/$DISK/inflight is sampled every 2 ms. A disk idle while the
client keeps 64 requests in flight means they are somewhere else: in the
daemon, the socket or the client. Not part of run-all.

  bench/disk_busy_probe.py --img /var/tmp/img --server old=PATH --server new=PATH[:key=val...] --reps 3

Device keys as in peers_probe.py (read_ahead_kb=0, top.limits.busy_poll=1ms);
env.NAME=VALUE sets an environment variable of that daemon."""
import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in (".", "lib", "../tests/lib/python")]
from nbdsched_test import fio  # noqa: E402
from nbdsched_test.daemon import Daemon  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402
import peers_probe  # noqa: E402

DISK = os.environ.get("DISK", "vda")


def disk_stat():
    with open(f"/sys/block/{DISK}/stat") as f:
        v = [int(x) for x in f.read().split()]
    return {"reads": v[0], "read_ticks": v[3], "io_ticks": v[9], "time_in_queue": v[10], "t": time.monotonic()}


class InflightSampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []
        self.stop = False

    def run(self):
        while not self.stop:
            with open(f"/sys/block/{DISK}/inflight") as f:
                self.samples.append(int(f.read().split()[0]))
            time.sleep(0.002)


def parse_server(text):
    """peers_probe's label=path[:key=value...], and env.NAME=VALUE: the
    daemon's environment (in top["__env"])."""
    label, rest = text.split("=", 1)
    path, *opts = rest.split(":")
    env = dict(o[4:].split("=", 1) for o in opts if o.startswith("env."))
    label, path, dev, top = peers_probe.parse_server(
        ":".join([f"{label}={path}"] + [o for o in opts if not o.startswith("env.")]))
    top["__env"] = env
    return label, path, dev, top


def one(jobname, job, g, pid=None):
    s = InflightSampler()
    d0 = disk_stat()
    s.start()
    r = fio.run(g, [(jobname, job)], [pid] if pid else [])
    s.stop = True
    s.join()
    d1 = disk_stat()
    ms = (d1["t"] - d0["t"]) * 1000
    reads = d1["reads"] - d0["reads"]
    js = r.job(jobname)
    sm = r.summary(js)
    cpu = r.server_cpu[0] / sm["ios"] * 1e6 if pid and sm["ios"] else None
    inf = s.samples[len(s.samples) // 10:]   # skip the ramp
    return {"iops": sm["iops"], "disk_util": (d1["io_ticks"] - d0["io_ticks"]) / ms,
            "disk_reads_s": reads / ms * 1000,
            "inflight_zero": sum(1 for x in inf if x == 0) / len(inf) if inf else 0,
            "disk_aqu": (d1["time_in_queue"] - d0["time_in_queue"]) / ms,
            "disk_lat_us": (d1["read_ticks"] - d0["read_ticks"]) / reads * 1000 if reads else 0,
            "inflight_mean": statistics.mean(inf) if inf else 0,
            "inflight_p10": sorted(inf)[len(inf) // 10] if inf else 0,
            "server_us": cpu, "clat_us": js[0]["read"]["clat_ns"]["mean"] / 1000}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--img", required=True)
    p.add_argument("--server", action="append", default=[])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--runtime", type=float, default=4)
    p.add_argument("--qd", type=int, default=64)
    p.add_argument("--rw", default="randread")
    p.add_argument("--bs", default="4k")
    p.add_argument("--no-raw", action="store_true")
    p.add_argument("--stats", action="store_true", help="print ctl stats --json of each daemon at the end")
    a = p.parse_args()
    g = {"thread": True, "time_based": True, "runtime": f"{int(a.runtime * 1000)}ms", "ramp_time": "500ms",
         "randrepeat": 0, "norandommap": True, "rw": a.rw, "bs": a.bs, "iodepth": a.qd, "size": "1g"}
    res = {}
    with TempDir("fwprobe") as tmp:
        daemons = {}
        try:
            for text in a.server:
                label, path, dev, top = parse_server(text)
                d = {"name": "d", "backend": "file", "path": a.img, "size": "1GiB", "direct": True,
                     "scheduler": "none", "io_engine": "io_uring", **dev}
                env = top.pop("__env", {})
                cfg = {"devices": [d], "exports": [{"name": "x", "device": "d"}], "log_level": "info", **top}
                saved = dict(os.environ)
                os.environ.update(env)
                daemons[label] = Daemon(cfg, label, workdir=tmp,
                                        control=True, binary=path)
                os.environ.clear()
                os.environ.update(saved)
            order = list(daemons) + ([] if a.no_raw else ["fio-raw"])
            for rep in range(a.reps):
                rot = order[rep % len(order):] + order[:rep % len(order)]
                for label in rot:
                    if label == "fio-raw":
                        job = {"ioengine": "io_uring", "filename": a.img, "direct": 1, "invalidate": 0}
                        r = one(label, job, g)
                    else:
                        dm = daemons[label]
                        job = {"ioengine": "nbd", "uri": f"nbd+unix:///x?socket={dm.sock}"}
                        r = one(label, job, g, dm.pid)
                    res.setdefault(label, []).append(r)
                    print(f"rep{rep} {label}: " + " ".join(f"{k}={v:.1f}" for k, v in r.items() if v is not None),
                          flush=True)
            if a.stats:
                for label, dm in daemons.items():
                    print(label, json.dumps(dm.stats(), indent=1)[:6000])
        finally:
            for dm in daemons.values():
                dm.stop()
    print("\n| server | IOPS | disk util | disk queue | inflight samples mean | disk read lat us | fio clat us | server us/IO |")
    print("|---|---|---|---|---|---|---|---|")
    for label, v in res.items():
        med = lambda k: statistics.median([x[k] for x in v if x[k] is not None] or [0])
        print(f"| {label} | {med('iops'):.0f} | {med('disk_util'):.2f} | {med('disk_aqu'):.1f} | {med('inflight_mean'):.1f} | "
              f"{med('disk_lat_us'):.0f} | {med('clat_us'):.0f} | {med('server_us'):.1f} |")
    if "fio-raw" in res:
        for label, v in res.items():
            if label == "fio-raw":
                continue
            ratios = [x["iops"] / b["iops"] for x, b in zip(v, res["fio-raw"])]
            print(f"{label}/fio-raw: median {statistics.median(ratios):.2f} range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
