"""The simulator's command line on the workload files it ships and on bad input,
and the scheduler micro-benchmark's on bad input.

Usage: test_cli.py NBDSCHED_SIM WORKLOADS_DIR NBDSCHED_SCHED_BENCH
Each check runs the real tool (virtual time or a few thousand requests: well
under a second each).
"""
import json
import os
import subprocess
import sys
import tempfile

SIM, WORKLOADS, SCHED_BENCH = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def sim(*args, tool=None):
    return subprocess.run([tool or SIM, *args], capture_output=True, text=True, timeout=120)


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def total(path, *args):
    r = sim(path, "--json", *args)
    if r.returncode != 0:
        check(False, f"{os.path.basename(path)} {' '.join(args)} runs (rc {r.returncode}: {r.stderr.strip()})")
        return None
    return json.loads(r.stdout)["total"]


def seed002_file_shows_idling_cost():
    # The file's comment and docs/simulator.md: idling costs IOPS and steadiness.
    path = os.path.join(WORKLOADS, "seed002_bfq_sync.yaml")
    idle = total(path, "--set", "slice_idle=8ms")
    no_idle = total(path, "--set", "slice_idle=0", "--set", "group_idle=0")
    if idle and no_idle:
        check(no_idle["iops"] > 2 * idle["iops"],
              f"seed002: no idling {no_idle['iops']:.0f} IOPS > 2 x idling {idle['iops']:.0f}")
        check(no_idle["lat_stddev_us"] < idle["lat_stddev_us"],
              f"seed002: sd without idling {no_idle['lat_stddev_us']:.0f} < with {idle['lat_stddev_us']:.0f} us")


def every_workload_file_runs():
    for name in sorted(os.listdir(WORKLOADS)):
        if name.endswith(".yaml"):
            r = sim(os.path.join(WORKLOADS, name), "--runtime", "2s")
            check(r.returncode == 0, f"{name} runs (rc {r.returncode}: {r.stderr.strip()[:200]})")


def ramp_not_below_runtime_is_an_error():
    # A run whose ramp covers it measures nothing: not an all-zero table, exit 0.
    path = workload("runtime: 1s\nramp_time: 5s\njobs: [{rw: read}]\n")
    r = sim(path)
    check(r.returncode == 2 and f"{path}:2:12: ramp_time: must be below runtime" in r.stderr,
          f"ramp_time 5s, runtime 1s: exit 2 naming file:line (rc {r.returncode}: {r.stderr.strip()})")
    r = sim(os.path.join(WORKLOADS, "seed000_ssd_randread.yaml"), "--runtime", "400ms")
    check(r.returncode == 2 and "ramp_time" in r.stderr,
          f"--runtime below the file's ramp_time: exit 2 (rc {r.returncode}: {r.stderr.strip()})")


def undefined_group_is_an_error():
    # A misspelt group name must not make a group of its own at the default weight.
    path = workload("groups: {heavy: 1000}\njobs:\n  - {name: a, group: haevy, rw: read}\n")
    r = sim(path)
    check(r.returncode == 2 and f"{path}:3:22: jobs[0].group: 'haevy' is not in groups:" in r.stderr,
          f"group not in groups: exit 2 naming file:line (rc {r.returncode}: {r.stderr.strip()})")


def input_errors_exit_2():
    # Every bad input has one documented status (docs/simulator.md), and a bad
    # --policy is named before anything is said about the file's tunables.
    seed003 = os.path.join(WORKLOADS, "seed003_groups.yaml")
    cases = {
        "--trace-window without --trace": [seed003, "--trace-window", "5ms"],
        "unknown option": [seed003, "--no-such-option"],
        "missing workload file": [os.path.join(TMP.name, "missing.yaml")],
        "unknown --policy": [seed003, "--policy", "bogus"],
        "bad tunable value": [seed003, "--set", "group_idle=abc"],
        "unknown profile parameter": [seed003, "--device", "rpm=7200"],
    }
    for what, args in cases.items():
        r = sim(*args)
        check(r.returncode == 2, f"{what}: exit 2 (rc {r.returncode}: {r.stderr.strip()[:200]})")
    r = sim(seed003, "--policy", "bogus")
    check("ignores" not in r.stderr and "unknown scheduler policy 'bogus'" in r.stderr,
          f"unknown --policy: named, no 'ignores' line ({r.stderr.strip()})")
    r = sim(seed003, "--help")
    check(r.returncode == 0, f"--help: exit 0 (rc {r.returncode})")


def sched_bench_errors_fail():
    # A cell that cannot be measured fails the run (bench/exp7 relies on the
    # status), and a run that measures nothing is not accepted.
    def bench(*args):
        requests = [] if "--requests" in args else ["--requests", "2000"]
        return sim(*requests, "--queues", "1", *args, tool=SCHED_BENCH)

    for what, args, want in [("unknown policy", ["--policy", "bogus"], 1),
                             ("bad tunable value", ["--set", "slice_idle=abc"], 1),
                             ("tunable no policy has", ["--set", "bogus=1"], 2),
                             ("--requests 0", ["--requests", "0"], 2),
                             ("--batch with the backlog pattern", ["--batch", "4"], 2),
                             ("--batch 0", ["--pattern", "inline", "--batch", "0"], 2)]:
        r = bench(*args)
        check(r.returncode == want, f"sched-bench {what}: exit {want} (rc {r.returncode}: {r.stdout.strip()[-200:]})")
    r = bench("--set", "slice_idle=0")
    check(r.returncode == 0 and "none ignores slice_idle" in r.stderr and "inf" not in r.stdout,
          f"sched-bench --set slice_idle=0: cfq and bfq measured, none ignores it (rc {r.returncode}: {r.stderr.strip()})")
    r = bench("--pattern", "inline", "--batch", "8")
    rows = [line.split() for line in r.stdout.splitlines()[1:]]
    check(r.returncode == 0 and [row[0] for row in rows] == ["none", "cfq", "bfq"] and
          all(row[3] == "2000" for row in rows),
          f"sched-bench --pattern inline --batch 8: every policy measured 2000 requests (rc {r.returncode}: {r.stdout.strip()})")


def workload(text):
    """A workload file in the test's temporary directory."""
    path = os.path.join(TMP.name, f"w{len(os.listdir(TMP.name))}.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


TMP = tempfile.TemporaryDirectory()
CHECKS = [seed002_file_shows_idling_cost, every_workload_file_runs, ramp_not_below_runtime_is_an_error,
          undefined_group_is_an_error, input_errors_exit_2,
          sched_bench_errors_fail]

if __name__ == "__main__":
    for c in CHECKS:
        c()
    TMP.cleanup()
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
