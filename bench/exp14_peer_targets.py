"""Experiment 14, the peers targets on steadier ground: the cells of
experiment 6 that the performance targets are judged on (4k randread qd1,
1 MiB sequential read and write qd8, 4k randwrite qd64, server CPU per 4k
randread qd64), nbdsched (`none`, `cfq`, `bfq`) against nbdkit memory (16
threads and `--threads 1`; each target against the faster, or for CPU the
cheaper, of the two in each repetition), over a Unix socket and TCP
loopback: 7 repetitions of 2 s where experiment 6 runs 3 of 1 s over 14
workloads and 8 servers.

On a shared machine one 1 s cell swings by tens of percent between
repetitions (a neighbour's burst takes a repetition of one server, not of
the whole run), so a median of 3 ratios moves with one bad repetition; with
7, three can go either way. The servers run back to back in each
repetition (`stonewall`), in an order rotated between repetitions, and
every ratio is paired within a repetition."""

import os
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import exp6_report  # noqa: E402
import peers_run  # noqa: E402
import report  # noqa: E402
import sched_bench  # noqa: E402
from nbdsched_test import servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp14-peer-targets"
SERVERS = ["nbdsched-none", "nbdsched-cfq", "nbdsched-bfq", "nbdkit", "nbdkit-t1"]
WORKLOADS = list(dict.fromkeys(w for _, w, _, _ in exp6_report.TARGETS))   # randread qd64 carries two targets
QUICK_WORKLOADS = [("randread", "4k", 64, 1)]   # --quick checks the script, in CI's bench-quick: one cell is enough


def own_cost_section(med, workloads, runs, requests):
    """Target 4 in the schedulers' own cost: what cfq and bfq add per
    request in nbdsched-sched-bench (no sockets, RAM's pattern, one queue),
    as a share of `none`'s whole CPU per request in each cell. Returns
    (text, shares within the bound, shares) or None without the tool."""
    ns = sched_bench.ns_per_request(["--pattern", "inline", "--queues", "1", "--requests", str(requests)], runs)
    if not ns or "none" not in ns:
        return None
    rows, within, count = [], 0, 0
    for w in workloads:
        for tr in peers_run.TRANSPORTS:
            m = med.get(("nbdsched-none", tr, w))
            if not m or not m[2]:
                continue
            row = [f"{peers_run.wl_name(w)}, {tr}", f"{m[2]:.1f}"]
            for sched in ("cfq", "bfq"):
                share = (ns[sched] - ns["none"]) / (m[2] * 1000)
                count += 1
                within += share <= exp6_report.SCHED_COST_BOUND
                row.append(f"{share:+.1%}")
            rows.append(row)
    text = (f"The same target in the schedulers' own cost, which the machine's noise moves far less (no "
            f"sockets, no second process): "
            f"`nbdsched-sched-bench --pattern inline --queues 1` (4 KiB requests from one queue, each completed "
            f"at once, as a RAM device's; the median of {runs} runs) spends {ns['none']:.0f} ns per request in "
            f"`none`, {ns['cfq']:.0f} in cfq and {ns['bfq']:.0f} in bfq. What cfq and bfq add, as a share of "
            f"`none`'s whole CPU per request in each cell above (the daemon's, median):\n\n"
            + report.table(["cell", "`none` µs/request", "cfq adds", "bfq adds"], rows)
            + f"\n\nWithin {exp6_report.SCHED_COST_BOUND:.0%}: **{within} of {count}**. The rest of the daemon's "
            "work per request (parsing, the device, the reply, the sockets) is the same code for the three.")
    return text, within, count


def main():
    a = common.args(__doc__)
    runtime, reps = (0.5, 1) if a.quick else (2, 7)
    workloads = QUICK_WORKLOADS if a.quick else WORKLOADS
    facts = report.Facts()
    image = f"/dev/shm/nbdbench-{os.getpid()}.img"   # fio's no-protocol limit
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    try:
        with TempDir("e14") as tmp, servers.Fleet() as srv:
            peers_run.start(srv, tmp, image, peers=("nbdkit", "nbdkit-t1"))
            peers_run.prefill(srv, list(srv.keys()), "16m" if a.quick else "1g")
            samples, commands, failures = peers_run.measure(srv, image, workloads, reps, runtime, tmp, "exp14")
    finally:
        os.unlink(image)
    med = common.medians({k: list(v.values()) for k, v in samples.items()})
    text, (within, measured, met, judged) = exp6_report.targets_verdict(samples, workloads)
    verdict = [f"{text} Targets 1-3: **{met} of {judged}** cells met."]
    interval_table, counts = exp6_report.targets_interval_table(samples, workloads)
    verdict.append(f"A median of {reps} ratios still moves with the machine: the same cells with the interval "
                   "that holds each median with 95% confidence (order statistics of the ratios: of 7, the lowest "
                   "to the highest; fewer than 6 give none, \"-\"), met or missed only when all of it is on one "
                   "side of the goal (`bench/targets_pooled.py` judges several runs together):"
                   f"\n\n{interval_table}\n\nMet {counts['met']}, missed {counts['missed']}, "
                   f"undecided {counts['undecided']}.")
    client = exp6_report.client_table(samples, workloads)
    if client:
        verdict.append(client)
    own = own_cost_section(med, workloads, *((3, 20000) if a.quick else (7, 2000000)))
    if own:
        verdict.append(own[0])
    if failures:
        verdict.append("Runs that failed or hung (the cell's median is over the other repetitions): "
                       + "; ".join(failures))
    sections = ([(None, __doc__.strip()), ("Verdict", "\n\n".join(verdict))]
                + exp6_report.tables(med, workloads, peers_run.wl_name, SERVERS)
                + [("Method", f"{reps} repetitions of {runtime} s per job after a 0.2 s ramp; every export written "
                    "once first (1 MiB writes); RAM everywhere (nbdsched `backend: ram` 1 GiB, `nbdkit memory "
                    "1G`); the no-protocol column is fio's libaio engine on a 1 GiB /dev/shm file. The "
                    "per-repetition numbers are in the .json beside this report.")])
    own_text = f"; in the schedulers' own cost {own[1]} of {own[2]}" if own else ""
    summary = {"setup": "RAM, nbdsched none/cfq/bfq vs nbdkit memory (16 threads, --threads 1), unix + tcp, "
                        f"the target cells, {reps} x {runtime} s",
               "seed": "-",
               "ours": f"targets 1-3: {met} of {judged} cells met; target 4 (cfq/bfq within 5% of none): "
                       f"{within} of {measured} end to end{own_text}"
                       + (f"; {len(failures)} runs failed" if failures else ""),
               "target": "1-3: >= 1x (qd1), 1.2x (1 MiB, randwrite qd64) the faster nbdkit, CPU <= 2/3 the cheaper; 4: every cell",
               "status": "no result" if judged == 0 else
                         f"1-3: {'met' if met == judged else 'missed'}; 4: {within} of {measured} end to end"
                         + (f", {'met' if own[1] == own[2] else 'missed'} in own cost" if own else "")}
    print(report.write(NAME, "Experiment 14: the peers targets, 7 repetitions", sections, facts, commands,
                       peers=True, quick=a.quick, summary=summary, runs=exp6_report.runs_json(samples, peers_run.wl_name)))


if __name__ == "__main__":
    main()
