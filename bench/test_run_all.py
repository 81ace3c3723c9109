"""bench/run-all's outcomes, on stand-in experiments in a copy of bench/: an
experiment that exits 77 is listed as skipped (not failed), a failure fails
the run, and the summary step copes with no results at all.

Usage: test_run_all.py BENCH_DIR (the bench/ whose run-all and lib/ to test)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BENCH = os.path.abspath(sys.argv[1])
TESTLIB = os.path.join(os.path.dirname(BENCH), "tests", "lib", "python")
failures = []

EXPERIMENTS = {
    # writes the summary row summary.py reads, as a real experiment does
    "exp1_ok.py": """import json, os, sys
d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "quick")
os.makedirs(d, exist_ok=True)
row = {"name": "exp1-ok", "title": "Experiment 1: ok", "setup": "-", "seed": "-", "ours": "-", "target": "-",
       "status": "met"}
json.dump(row, open(os.path.join(d, "exp1-ok.json"), "w"))
""",
    "exp2_skip.py": "print('SKIP: no widget installed')\nraise SystemExit(77)\n",
    "exp3_fail.py": "raise SystemExit(1)\n",
}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return f"({e})"


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def tree(tmp):
    """A bench/ with run-all, lib/summary.py, lib/report.py and the stand-ins."""
    bench = os.path.join(tmp, "bench")
    os.makedirs(os.path.join(bench, "lib"))
    shutil.copy(os.path.join(BENCH, "run-all"), bench)
    for f in ("summary.py", "report.py"):
        shutil.copy(os.path.join(BENCH, "lib", f), os.path.join(bench, "lib"))
    os.makedirs(os.path.join(tmp, "tests", "lib"))
    os.symlink(TESTLIB, os.path.join(tmp, "tests", "lib", "python"))
    for name, text in EXPERIMENTS.items():
        with open(os.path.join(bench, name), "w") as f:
            f.write(text)
    # run-all checks for these tools before it runs anything
    fakebin = os.path.join(tmp, "bin")
    os.makedirs(fakebin)
    for tool in ("fio", "nbdkit", "qemu-nbd", "nbdcopy", "psktool"):
        path = os.path.join(fakebin, tool)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(path, 0o755)
    env = dict(os.environ, PATH=fakebin + ":" + os.environ["PATH"], NBDSCHED="/bin/true")
    return bench, env


def run_all(bench, env, *args, results_before=None):
    """run-all --quick on an empty results/quick, or on one holding the
    summary rows `results_before` ({name: row}) of an earlier run."""
    shutil.rmtree(os.path.join(bench, "results"), ignore_errors=True)
    if results_before:
        d = os.path.join(bench, "results", "quick")
        os.makedirs(d)
        for name, row in results_before.items():
            with open(os.path.join(d, f"{name}.json"), "w") as f:
                json.dump(row, f)
    r = subprocess.run([os.path.join(bench, "run-all"), "--quick", *args], capture_output=True, text=True,
                       env=env, timeout=120)
    return r.returncode, r.stdout + r.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        bench, env = tree(tmp)
        rc, out = run_all(bench, env, "--only", "skip")
        check(rc == 77, f"only a skipped experiment: exit 77 (rc {rc})")
        check("SKIP exp2_skip: no widget installed" in out and "FAILED" not in out,
              "the skip is listed with its reason, not as a failure")
        check("Traceback" not in out, "the summary step copes with no results directory")
        rc, out = run_all(bench, env, "--only", "ok")
        check(rc == 0 and os.path.exists(os.path.join(bench, "results", "quick", "README.md")),
              f"one experiment that runs: exit 0 and a summary (rc {rc})")
        rc, out = run_all(bench, env)
        check(rc == 1 and "exp3_fail FAILED" in out and "1 ran, 1 skipped, 1 failed" in out,
              f"ran, skipped and failed together: exit 1, each counted (rc {rc})")
        earlier = {"name": "exp3-fail", "title": "Experiment 3: fail", "setup": "-", "seed": "-",
                   "ours": "12.3x", "target": "-", "status": "met", "load": "0.5 0.5 0.5 / 0.6 0.6 0.6"}
        rc, out = run_all(bench, env, "--only", "fail", results_before={"exp3-fail": earlier})
        readme = read(os.path.join(bench, "results", "quick", "README.md"))
        row = [line for line in readme.splitlines() if "exp3-fail.md" in line]
        check(rc == 1 and row and "FAILED in this run" in row[0] and "**met**" not in row[0],
              f"a failed experiment's row from an earlier run is marked, not shown as current (rc {rc}): {row}")
        rc, out = run_all(bench, env, "--only", "fail")
        readme = read(os.path.join(bench, "results", "quick", "README.md"))
        check(rc == 1 and "exp3_fail" in readme and "FAILED in this run" in readme,
              f"a failed experiment without an earlier row gets one saying so (rc {rc})")
        if failures:
            print(out)
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
