"""Writes results/README.md (or results/quick/README.md) from the .json
summary rows the experiments leave next to their reports."""

import json
import os
import sys

# report needs the test library (tests/lib/python) beside bench/lib
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/lib/python"))
import report  # noqa: E402

NOTES = """Numbers are from one `bench/run-all` on a shared 2-core machine at a quiet hour (load average
about 1-2 at the start of each experiment; experiments re-run alone with `--only` after a script change
carry their own date and load averages in their reports). The emulated profiles release replies by timers,
so results are in emulated time; where the daemon or fio ran out of CPU the reports say so (\"daemon CPU\"
columns). Each report states the profile parameters (the documented defaults; the one variant derived from
a seed's own numbers, experiment 1's `cloud`, says so), the exact daemon configuration and fio commands, and
the machine facts. What limited each result, and the scheduler findings, are in [analysis.md](analysis.md)."""

# Results outside run-all, linked under the table.
ALSO = """[data-path.md](data-path.md): the data-path changes (one `sendmsg` per batch of replies, zero copy from RAM,
no read-ahead on RAM, `busy_poll`, `coalesce`) before and after, in system calls, profiles and CPU per I/O, with
`bench/peers_probe.py`, `bench/syscall_count.sh` and `bench/syscalls_per_request.sh` (not part of `run-all`; taken on a
loaded machine). [exp14-pooled.md](exp14-pooled.md): experiment 14's targets 1-3 on several runs pooled, each cell's
median with the interval that holds it with 95% confidence (`bench/targets_pooled.py`).
[sched-cost-probe.md](sched-cost-probe.md): target 4 (what cfq and bfq cost against `none`) measured without the
device memory's lottery, with a second `none` as the control (`bench/sched_cost_probe.py`, not part of `run-all`)."""


def experiment_number(file_name):
    """exp10-... sorts after exp9-...: by the number, not the text."""
    digits = "".join(c for c in file_name[3:].split("-")[0] if c.isdigit())
    return (int(digits) if digits else 0, file_name)


def main(quick, failed=()):
    """failed: the experiments (script names, exp6_peers) that failed in
    this run: their rows say so, whether an earlier run left one or not."""
    d = os.path.join(report.RESULTS, "quick") if quick else report.RESULTS
    if not os.path.isdir(d) and not failed:   # no experiment ran (all skipped, or --only matched none)
        print(f"summary: no results in {d}, no README written")
        return
    os.makedirs(d, exist_ok=True)
    failed = {f.replace("_", "-"): f for f in failed}   # exp6_peers.py writes exp6-peers.json
    rows = []
    for f in sorted(os.listdir(d), key=experiment_number):
        if not f.endswith(".json"):
            continue
        with open(os.path.join(d, f)) as fh:
            s = json.load(fh)
        link = f"[{s['title'].split(':')[0]}]({s['name']}.md)"
        if os.path.exists(os.path.join(d, s["name"] + ".png")):
            link += f" ([plot]({s['name']}.png))"
        status = f"**{s['status']}**"
        if failed.pop(s["name"], None):
            status = (f"**FAILED in this run**; the numbers and status ({s['status']}) are an earlier run's "
                      f"(load {s.get('load', 'not recorded')})")
        rows.append((link, s["setup"], s["seed"], s["ours"], s["target"], status))
    for name in sorted(failed.values(), key=experiment_number):
        rows.append((name, "-", "-", "-", "-", "**FAILED in this run**; no results"))
    text = ["# Benchmark results", "", NOTES, "",
            report.table(["experiment", "setup", "seed", "nbdsched", "target", "status"], rows), "",
            *([] if quick else [ALSO, ""]),
            "Reproduce everything (about 20 minutes):", "", "```sh",
            "scripts/build build-bench --buildtype=release -Db_lto=true   # the release as CI builds it", "NBDSCHED=build-bench/daemon/nbdsched bench/run-all",
            "```", "", "`bench/run-all --quick` is the CI smoke check (a few minutes; it checks that the "
            "scripts work, not speed, and writes to `bench/results/quick/`, which git ignores).", ""]
    path = os.path.join(d, "README.md")
    with open(path, "w") as fh:
        fh.write("\n".join(text))
    print(path)


if __name__ == "__main__":
    main("--quick" in sys.argv, [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--failed=")])
