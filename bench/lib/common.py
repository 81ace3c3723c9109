"""What every experiment script shares: arguments, device dicts, the
stated profile parameters, the fio base options. Servers, fio and scratch
directories come from the test library (tests/lib/python/nbdsched_test)."""

import argparse
import math
import statistics
import time

# The profile defaults of docs/timing-models.md. The benchmarks use them
# unchanged (no tuning toward the seed numbers); reports print this table.
PROFILE_DEFAULTS = {
    "hdd": {"rpm": 7200, "settle": "0.5ms", "avg_seek": "4.5ms", "full_stroke_seek": "9ms",
            "transfer_rate": "170MiB/s", "max_io": "1280KiB", "optimal_io": "none",
            "capacity": "1TiB", "queue_depth": 32},
    "ssd": {"read_latency": "100us", "write_latency": "60us", "channels": 8, "queue_depth": 32,
            "bandwidth": "530MiB/s", "max_io": "512KiB", "optimal_io": "none"},
}


def args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="smoke run: tiny runtimes, results/quick/")
    return p.parse_args()


def option_value(text):
    """A configuration value given on a command line (key=value): a number,
    true/false, or the text as it is (a duration, a size)."""
    return int(text) if text.isdigit() else {"true": True, "false": False}.get(text, text)


def ram_device(name, size, scheduler="none", tunables=None, profile=None, params=None, **extra):
    d = {"name": name, "backend": "ram", "size": size, "scheduler": scheduler}
    if tunables:
        d["tunables"] = tunables
    if profile:
        d["profile"] = profile
        if params:
            d[profile] = params
    d.update(extra)
    return d


def fio_base(runtime, ramp):
    """Options every fio run shares. thread: one process, many libnbd handles."""
    return {"ioengine": "nbd", "thread": True, "time_based": True, "runtime": f"{int(runtime * 1000)}ms",
            "ramp_time": f"{int(ramp * 1000)}ms", "randrepeat": 0, "norandommap": True}


def profile_section(profile, overrides=None):
    import report
    params = dict(PROFILE_DEFAULTS[profile])
    params.update(overrides or {})
    rows = [(k, v, "" if k not in (overrides or {}) else "overridden") for k, v in params.items()]
    return report.table([f"`{profile}` parameter", "value", ""], rows)


def commands_for(srv, results):
    """The daemon config and the fio commands, socket path replaced by SOCK."""
    import json
    cmds = ["cat > cfg.yaml <<'EOF'", json.dumps(srv.config, indent=1).replace(srv.sock, "SOCK"), "EOF",
            "$NBDSCHED --config cfg.yaml &"]
    seen = set()
    for r in results:
        c = r.command.replace(srv.sock, "SOCK") if srv.sock else r.command
        if c not in seen:
            seen.add(c)
            cmds.append(c)
    return cmds


def medians(samples):
    """{key: [tuple of measurements per repetition]} -> {key: tuple of the
    per-field medians}. None values (not measured) are skipped; a field never
    measured stays None."""
    med = {}
    for key, vals in samples.items():
        med[key] = tuple(statistics.median([v[i] for v in vals if v[i] is not None])
                         if any(v[i] is not None for v in vals) else None for i in range(len(vals[0])))
    return med


def mean_summary(results):
    """fio Results of repeated runs -> one summary with each field's mean. With
    2 repetitions the median is their mean (sorting and taking index 1 would
    take the larger)."""
    sums = [r.summary() for r in results]
    return {k: statistics.fmean(s[k] for s in sums) for k in sums[0]}


def ratio_median(num, den):
    """The median over repetitions of num[i] / den[i] (one number per
    repetition each, from runs interleaved so that repetition i of both ran
    close in time): a ratio never mixes two repetitions. With 2 repetitions,
    the mean of the two ratios."""
    return statistics.median(n / d if d else float("inf") for n, d in zip(num, den))


def ratios_by_rep(num, den):
    """num[r] / den[r] of two {repetition: value} dicts, for each repetition
    both have (a failed run leaves its repetition out on one side only);
    None when they share none or a shared one is 0 or None (not measured)."""
    reps = sorted(set(num) & set(den))
    if not reps or not all(num[r] and den[r] for r in reps):
        return None
    return [num[r] / den[r] for r in reps]


def ratio_by_rep(num, den):
    """The median of ratios_by_rep, or None."""
    ratios = ratios_by_rep(num, den)
    return None if ratios is None else statistics.median(ratios)


def median_interval(values, confidence=0.95):
    """Where the median of what `values` sample lies, without assuming how
    they spread (the sign test's interval): the order statistics x(l) and
    x(n+1-l) for the largest l that still covers the median with at least
    `confidence`. Returns (low, high, coverage), or None for too few values
    (at least 6 for 95%)."""
    xs = sorted(values)
    n = len(xs)
    found = None
    below = 0.0   # P(Binomial(n, 1/2) <= l - 1): the median below x(l)
    for l in range(1, n // 2 + 1):
        below += math.comb(n, l - 1) / 2 ** n
        coverage = 1 - 2 * below
        if coverage < confidence:
            break
        found = (xs[l - 1], xs[n - l], coverage)
    return found


def export_bytes(srv, keys=("read_bytes", "write_bytes")):
    """{export name: bytes read + written} from the daemon's counters (or
    the sum of other counters: ("reads", "writes") counts requests)."""
    out = {}
    for dev in srv.stats()["devices"]:
        for e in dev["exports"]:
            out[e["name"]] = sum(e[k] for k in keys)
    return out


def _counted_at(srv, keys):
    """export_bytes() and when it was read: the middle of the control call
    (tens of ms on a loaded host, a percent of a short window)."""
    t = time.monotonic()
    counts = export_bytes(srv, keys)
    return counts, (t + time.monotonic()) / 2


def server_window(srv, global_opts, jobs, runtime, ramp, requests=False):
    """Runs fio (`global_opts` without runtime/ramp) for ramp + runtime and
    measures each export's MiB/s on the server over the same wall-clock
    window for every job: from `ramp` after fio started to `runtime` later.
    fio's own ramp_time would not do for weighted groups on a disk: fio
    ends a job's ramp at its first completion after ramp_time, so a light
    group that waits ~1 s between slices starts (and ends) its measured
    window later than the heavy one and has the device alone at the end
    (exp9 hdd bfq qd16 read 3.2:1 that way, 9:1 measured on the server).
    fio's runtime also counts the time it waits for its last requests after
    the end and leaves their completions out, so a job held back by a limit
    (8 requests queued at 20 IOPS: 0.4 s) reads a few percent low in fio.
    Returns ({export: MiB/s, or requests/s with `requests`}, fio Result).
    Needs start_nbdsched(control=True)."""
    from nbdsched_test import fio
    g = dict(global_opts)
    g.update({"runtime": f"{int((ramp + runtime) * 1000) + 150}ms", "ramp_time": "0ms"})
    with fio.start(g, jobs, [srv]) as running:
        time.sleep(ramp)
        keys, unit = (("reads", "writes"), 1) if requests else (("read_bytes", "write_bytes"), 2**20)
        before, t0 = _counted_at(srv, keys)
        time.sleep(runtime)
        after, t1 = _counted_at(srv, keys)
        result = running.finish()
    rate = {k: (after[k] - before.get(k, 0)) / (t1 - t0) / unit for k in after}
    return rate, result
