"""Runs fio with --output-format=json and sums what tests and benchmarks
report. One fio job (or each clone of numjobs) is one libnbd connection,
which the daemon serves as one scheduler queue."""
import json
import math
import shlex
import shutil
import subprocess
import time

from .process import cpu_seconds
from .verdict import skip


def require_installed():
    if not shutil.which("fio"):
        skip("fio is not installed")


def require_nbd_engine():
    require_installed()
    r = subprocess.run(["fio", "--enghelp=nbd"], capture_output=True, text=True)
    if "uri" not in r.stdout:
        skip("this fio has no nbd engine")


def fio_command(global_opts, jobs):
    """global_opts: dict of fio options (True: a bare flag); jobs: list of
    (name, dict)."""
    argv = ["fio", "--output-format=json"]
    for k, v in global_opts.items():
        argv.append(f"--{k}" if v is True else f"--{k}={v}")
    for name, opts in jobs:
        argv.append(f"--name={name}")
        for k, v in opts.items():
            argv.append(f"--{k}" if v is True else f"--{k}={v}")
    return argv


def shell(argv):
    return " ".join(shlex.quote(a) for a in argv)


class FioError(RuntimeError):
    pass


class Running:
    """fio started in the background (the caller acts on the server while
    it runs); finish() waits and returns the Result; leaving a `with`
    block kills a fio still running. `servers` are Server objects (or
    pids) whose CPU time is measured across the run."""

    def __init__(self, global_opts, jobs, servers=()):
        self.argv = fio_command(global_opts, jobs)
        # a pid, or a Server whose cpu() may count more than one process
        self._cpu = [(lambda p=s: cpu_seconds(p)) if isinstance(s, int) else s.cpu for s in servers]
        self._cpu0 = [cpu() for cpu in self._cpu]
        self._t0 = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, timeout=None):
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise
        wall = time.monotonic() - self._t0
        cpu = [now() - c for now, c in zip(self._cpu, self._cpu0)]
        if self.proc.returncode != 0:
            raise FioError(f"fio failed ({self.proc.returncode}): {shell(self.argv)}\n{err[-2000:]}{out[-1000:]}")
        data = json.loads(out[out.index("{"):])   # fio may print notes before the JSON
        return Result(self.argv, data, wall, cpu)


    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def start(global_opts, jobs, servers=()):
    return Running(global_opts, jobs, servers)


def run(global_opts, jobs, servers=(), timeout=None):
    """Runs fio to the end; returns a Result."""
    return Running(global_opts, jobs, servers).finish(timeout)


def _pooled(parts):
    """parts: (n, mean, stddev) per job -> (mean, stddev) over all samples."""
    n = sum(p[0] for p in parts)
    if n == 0:
        return 0.0, 0.0
    mean = sum(p[0] * p[1] for p in parts) / n
    var = sum(p[0] * (p[2] ** 2 + (p[1] - mean) ** 2) for p in parts) / n
    return mean, math.sqrt(var)


class Result:
    def __init__(self, argv, data, wall, server_cpu):
        self.argv = argv
        self.command = shell(argv)
        self.data = data
        self.wall = wall
        self.server_cpu = server_cpu   # seconds, per server passed to run()
        self.jobs = data["jobs"]

    def _dirs(self, job, rw):
        return [job[d] for d in (("read", "write") if rw is None else (rw,))]

    def job(self, name):
        """Every clone (numjobs) of job `name`; KeyError when fio ran no job
        of that name, so that a misspelt name fails instead of summing to
        0 IOPS."""
        found = [j for j in self.jobs if j["jobname"] == name]
        if not found:
            names = ", ".join(dict.fromkeys(j["jobname"] for j in self.jobs))
            raise KeyError(f"fio ran no job named {name!r} (jobs: {names})")
        return found

    def summary(self, jobs=None, rw=None):
        """Totals over `jobs` (default all): iops, bw_mib (MiB/s), lat mean and
        stddev in us (completion latency as fio's lat, submission to
        completion), p99 in us, ios."""
        jobs = self.jobs if jobs is None else jobs
        iops = bw = ios = 0.0
        parts = []
        p99 = 0.0
        for j in jobs:
            for d in self._dirs(j, rw):
                iops += d["iops"]
                bw += d["bw"] / 1024.0
                ios += d["total_ios"]
                lat = d["lat_ns"]
                if d["total_ios"]:
                    parts.append((d["total_ios"], lat["mean"] / 1000, lat["stddev"] / 1000))
                pct = d.get("clat_ns", {}).get("percentile", {})
                p99 = max(p99, pct.get("99.000000", 0) / 1000)
        mean, sd = _pooled(parts)
        return {"iops": iops, "bw_mib": bw, "lat_us": mean, "sd_us": sd, "p99_us": p99, "ios": ios}

    def window_iops(self, jobs=None, rw=None):
        """Requests per second over the measured window, summed over `jobs`
        (default all). fio's own iops divides the requests a job issued in
        its window (total_ios) by a runtime that also counts the wait for
        those still out when the window ended: a time_based job with many
        requests queued on a slow device reads low (8 x iodepth 64 behind a
        pool of 32 on the `hdd` profile: 3.8 s of that wait after a 12 s
        window, fio said 38 IOPS where the daemon served 49). For a
        time_based job the window is its runtime option; for others fio's
        number stands (the wait is part of such a run)."""
        jobs = self.jobs if jobs is None else jobs
        total = 0.0
        for j in jobs:
            window = self._window_ms(j["jobname"])
            for d in self._dirs(j, rw):
                if window and d["runtime"] > window:
                    total += d["total_ios"] * 1000.0 / window
                else:
                    total += d["iops"]
        return total

    def _window_ms(self, name):
        """The runtime option, in ms, of a time_based job named `name` (the
        command line's global options, then the job's own); None otherwise."""
        opts, job = {}, None
        for a in self.argv[1:]:
            if not a.startswith("--"):
                continue
            key, _, value = a[2:].partition("=")
            if key == "name":
                job = value
            elif job is None or job == name:
                opts[key] = value
        if "time_based" not in opts or "runtime" not in opts:
            return None
        return _duration_ms(opts["runtime"])

    def client_cpu(self, jobs):
        """fio's own CPU seconds (user + system) in `jobs` while they measured
        (each job's usr_cpu and sys_cpu are shares of its runtime, counted
        per thread under `thread`, without the ramp)."""
        return sum((j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] / 1000.0 for j in jobs)

    def per_job(self, rw=None):
        return {j["jobname"]: self.summary([j], rw) for j in self.jobs}

    def busy(self, ramp, index=0):
        """CPU share of one core that server `index` used while fio measured
        (its CPU time over runtime + ramp; connection setup adds a little)."""
        t = self.runtime_s() + ramp
        return self.server_cpu[index] / t if t > 0 else 0.0

    def runtime_s(self):
        return max((max(j["read"]["runtime"], j["write"]["runtime"]) for j in self.jobs), default=0) / 1000.0


def _duration_ms(text):
    """fio's time option (a bare number is seconds) in ms."""
    for suffix, ms in (("us", 0.001), ("ms", 1.0), ("s", 1000.0), ("m", 60000.0), ("h", 3600000.0)):
        if text.endswith(suffix) and text[:-len(suffix)].replace(".", "", 1).isdigit():
            return float(text[:-len(suffix)]) * ms
    return float(text) * 1000.0


def version():
    return subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip()
