"""The simulator's command line on the workload files it ships and on bad input.

Usage: test_cli.py NBDSCHED_SIM WORKLOADS_DIR
Each check runs the real nbdsched-sim (virtual time: well under a second each).
"""
import json
import os
import subprocess
import sys
import tempfile

SIM, WORKLOADS = sys.argv[1], sys.argv[2]
failures = []


def sim(*args):
    return subprocess.run([SIM, *args], capture_output=True, text=True, timeout=120)


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


def workload(text):
    """A workload file in the test's temporary directory."""
    path = os.path.join(TMP.name, f"w{len(os.listdir(TMP.name))}.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


TMP = tempfile.TemporaryDirectory()
CHECKS = [seed002_file_shows_idling_cost, every_workload_file_runs]

if __name__ == "__main__":
    for c in CHECKS:
        c()
    TMP.cleanup()
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)
