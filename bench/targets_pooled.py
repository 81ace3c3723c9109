#!/usr/bin/env python3
"""The peers targets judged on several runs of experiment 14 (fio) or 15
(nbdsched-load) pooled:
each run's repetitions stay paired within that run (nbdsched and nbdkit ran
seconds apart), and all the runs' ratios together give each cell a median
and the interval that holds it with 95% confidence, assuming nothing about
how the ratios spread (common.median_interval). A cell is met when the whole
interval is on the goal's side, missed when all of it is on the other side,
and undecided when this machine's noise is wider than the distance to the
goal. One run's 7 repetitions give an interval from its lowest ratio to its
highest; three runs' 21, from the 6th to the 16th. Target 4 (cfq and bfq
within 5% of `none`) is judged the same way on their paired costs.

Not part of run-all: it runs nothing, it reads reports.

  bench/targets_pooled.py 820c858 3777c77 694c0bd          # commits' bench/results/exp14-peer-targets.json
  bench/targets_pooled.py run1.json run2.json --out bench/results/exp14-pooled.md
  bench/targets_pooled.py --experiment 15 7d58335 ...       # bench/results/exp15-light-client.json
"""

import argparse
import json
import os
import subprocess
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import exp6_report  # noqa: E402
import peers_run  # noqa: E402

# experiment -> (its report's .json, the client its client table names)
EXPERIMENTS = {"14": ("bench/results/exp14-peer-targets.json", "fio"),
               "15": ("bench/results/exp15-light-client.json", "nbdsched-load")}


def load(run, report=EXPERIMENTS["14"][0]):
    """A report's .json: a file, or a commit whose `report` to read."""
    if os.path.isfile(run):
        with open(run) as f:
            return json.load(f)
    return json.loads(subprocess.check_output(["git", "show", f"{run}:{report}"]))


def pooled_samples(reports):
    """The reports' repetitions as one exp6_report samples dict, each keyed
    (run, repetition) so that a ratio pairs only servers of the same run.
    A field a report did not record (fio's own CPU, before it was) is None."""
    samples = {}
    for i, rep in enumerate(reports):
        for cell, rows in rep["runs"].items():
            server, transport, workload = cell.split(" ", 2)
            key = (server, transport, peers_run.wl_parse(workload))
            for row in rows:
                samples.setdefault(key, {})[(i, row["repetition"])] = tuple(row.get(f) for f in exp6_report.RUN_FIELDS)
    return samples


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="the experiment's reports: .json files or commits")
    p.add_argument("--experiment", choices=sorted(EXPERIMENTS), default="14",
                   help="whose reports a commit names (default 14)")
    p.add_argument("--out", help="also write the table to this Markdown file")
    a = p.parse_args()
    report, client_name = EXPERIMENTS[a.experiment]
    samples = pooled_samples([load(r, report) for r in a.runs])
    workloads = list(dict.fromkeys(w for _, _, w in samples))
    table, counts = exp6_report.targets_interval_table(samples, workloads)
    option = "" if a.experiment == "14" else f"--experiment {a.experiment} "
    text = (f"# Experiment {a.experiment}, runs pooled\n\n"
            f"Runs: {', '.join(a.runs)}. `bench/targets_pooled.py {option}{' '.join(a.runs)}`.\n\n"
            "nbdsched `none` against the better nbdkit setting of each repetition (throughput: the faster; "
            "CPU per request: the cheaper); the median of all the runs' paired ratios, [the interval holding "
            "that median with 95% confidence] of how many ratios:\n\n"
            f"{table}\n\nMet {counts['met']}, missed {counts['missed']}, undecided {counts['undecided']}.\n")
    costs, spread = exp6_report.sched_cost_interval_table(samples, workloads)
    text += (f"\nTarget 4, what cfq and bfq cost against `none` in the same repetition (throughput lost, or CPU "
             f"added), judged the same way against {exp6_report.SCHED_COST_BOUND:.0%}:\n\n{costs}\n\n"
             f"Within {spread['within']}, beyond {spread['beyond']}, undecided {spread['undecided']}.\n")
    client = exp6_report.client_table(samples, workloads, client=client_name)
    if client:
        text += f"\n{client}\n\nOnly the runs that recorded {client_name}'s CPU count here.\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
