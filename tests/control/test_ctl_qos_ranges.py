"""`ctl reserve|limit|latency-target` take the values the configuration
takes and refuse the others with the configuration's words
(sched/qos/spec.hpp): iops 1..100000000, bps 4KiB (one 4 KiB request a
second; below is a typo for MiB) and up, burst 1ms..10s (and
only with a rate: a burst alone is no limit), latency target 100us..10s.
0 is not a way to clear (it used to clear silently), nor is a burst alone
(it used to remove the limit): `off` is, and a refused command leaves the
group as it was.
The same values in the file are refused by --check-config, with the same
words."""
import subprocess
import sys

from nbdsched_test.daemon import Daemon, nbdsched_binary
from nbdsched_test.verdict import Checks

CONFIG = """devices:
  - {name: d0, backend: ram, size: 16MiB, scheduler: bfq}
exports:
  - {name: e, device: d0, group: g}
groups:
  - {name: g, reserve: {iops: 50}, limit: {iops: 500, burst: 200ms}, latency_target: 20ms}
"""

# (ctl arguments, what the refusal must say)
REFUSED = [
    (["reserve", "g", "iops=0"], "out of range: 0 (allowed 1..100000000)"),
    (["reserve", "g", "iops=100000001"], "out of range: 100000001 (allowed 1..100000000)"),
    (["reserve", "g", "bps=0"], "bps must be above 0 (leave it out for no byte rate)"),
    (["limit", "g", "bps=100"], "bps 100B is below 4KiB, one 4KiB request a second (bps is bytes per second: 100MiB"),
    (["reserve", "g", "bps=4095"], "bps 4095B is below 4KiB"),
    (["limit", "g", "iops=0"], "out of range: 0 (allowed 1..100000000)"),
    (["limit", "g", "iops=600", "burst=10min"], "expected a duration from 1ms to 10s, e.g. 100ms, got '10min'"),
    (["limit", "g", "iops=600", "burst=0"], "expected a duration from 1ms to 10s, e.g. 100ms, got '0'"),
    (["limit", "g", "burst=1s"], "limit: needs iops=, bps= or both"),   # it used to remove the limit, exit 0
    (["latency-target", "g", "0"], "expected a duration from 100us to 10s, e.g. 10ms, got '0'"),
    (["latency-target", "g", "1ns"], "expected a duration from 100us to 10s, e.g. 10ms, got '1ns'"),
    (["latency-target", "g", "10min"], "expected a duration from 100us to 10s, e.g. 10ms, got '10min'"),
]

# The same values in the file: key, value, what --check-config must say.
FILE_REFUSED = [
    ("reserve", "{iops: 0}", "out of range: 0 (allowed 1..100000000)"),
    ("reserve", "{bps: 0}", "bps must be above 0 (leave it out for no byte rate)"),
    ("limit", "{bps: 100}", "bps 100B is below 4KiB, one 4KiB request a second (bps is bytes per second: 100MiB"),
    ("reserve", "{bps: 1}", "bps 1B is below 4KiB"),
    ("limit", "{iops: 10, burst: 10min}", "expected a duration from 1ms to 10s, e.g. 100ms, got '10min'"),
    ("limit", "{burst: 1s}", "limit: needs iops:, bps: or both"),
    ("latency_target", "1ns", "expected a duration from 100us to 10s, e.g. 10ms, got '1ns'"),
]


def qos_of(d):
    return next(g for g in d.listing()["groups"] if g["name"] == "g")["qos"]


def main():
    checks = Checks()
    with Daemon(CONFIG, "ctl_qos_ranges") as d:
        before = qos_of(d)
        for args, words in REFUSED:
            r = subprocess.run([nbdsched_binary(), "ctl", "--socket", d.control, *args],
                               capture_output=True, text=True, timeout=30)
            checks.check(f"ctl {' '.join(args)} refused: {words}", r.returncode == 1 and words in r.stderr,
                         f"exit {r.returncode}, {r.stderr.strip()!r}")
        after = qos_of(d)
        checks.check("the refused commands changed nothing", after == before, f"{before} -> {after}")

        # The ends of each range are taken.
        for args in (["reserve", "g", "iops=1", "bps=4KiB"], ["limit", "g", "iops=100000000", "burst=10s"],
                     ["latency-target", "g", "100us"]):
            r = subprocess.run([nbdsched_binary(), "ctl", "--socket", d.control, *args],
                               capture_output=True, text=True, timeout=30)
            checks.check(f"ctl {' '.join(args)} taken", r.returncode == 0, r.stderr.strip())
        q = qos_of(d)
        checks.check("the ends of the ranges applied",
                     q["reserve"]["iops"] == 1 and q["reserve"]["bps"] == 4096 and q["limit"]["iops"] == 100000000 and q["limit"]["burst_ms"] == 10000
                     and q["latency_target_ms"] == 0.1, str(q))

        # off is the way to clear.
        d.ctl("latency-target", "g", "off")
        d.ctl("reserve", "g", "off")
        q = qos_of(d)
        checks.check("off clears the latency target and the reservation",
                     q["latency_target_ms"] == 0 and q["reserve"]["iops"] == 0 and q["limit"]["iops"] == 100000000,
                     str(q))

        for key, value, words in FILE_REFUSED:
            bad = d.file(f"bad-{key}.yaml")
            with open(bad, "w") as f:
                f.write(CONFIG.replace("reserve: {iops: 50}, limit: {iops: 500, burst: 200ms}, latency_target: 20ms",
                                       f"{key}: {value}"))
            r = subprocess.run([nbdsched_binary(), "--check-config", bad], capture_output=True, text=True, timeout=30)
            out = r.stdout + r.stderr
            checks.check(f"--check-config refuses {key}: {value} with the same words",
                         r.returncode != 0 and words in out, out.strip())
        if checks.failed:
            d.print_log_tail()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
