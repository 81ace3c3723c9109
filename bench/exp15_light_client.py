"""Experiment 15, the peers targets with a client that is not the limit:
experiment 14's cells (4k randread qd1, 1 MiB sequential read and write
qd8, 4k randwrite qd64, 4k randread qd64), nbdsched (`none`, `cfq`, `bfq`)
against nbdkit memory (16 threads and `--threads 1`), over a Unix socket
and TCP loopback, driven by nbdsched-load (tools/load) instead of fio.

In experiment 14 fio keeps its one thread 0.96-0.98 busy against nbdsched
at 4k randwrite qd64 and 1 MiB writes over TCP: there the rate is fio's,
and a server can go faster only by costing fio less per request.
nbdsched-load sends every free slot's request in one system call and reads
every reply that has arrived in another, so its cost per request is a
fraction of fio's; the rate it measures is the server's. Experiment 14
stays the measure a user's fio sees; this one says which server is faster
where the client leaves room. One connection per server, as there; 7
repetitions of 2 s, the servers in an order rotated between repetitions,
every ratio paired within a repetition."""

import os
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import exp6_report  # noqa: E402
import peers_run  # noqa: E402
import report  # noqa: E402
from nbdsched_test import servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp15-light-client"
CLIENT = "nbdsched-load"
SERVERS = ["nbdsched-none", "nbdsched-cfq", "nbdsched-bfq", "nbdkit", "nbdkit-t1"]
WORKLOADS = list(dict.fromkeys(w for _, w, _, _ in exp6_report.TARGETS))
QUICK_WORKLOADS = [("randwrite", "4k", 64, 1)]


def main():
    a = common.args(__doc__)
    tool = peers_run.light_client_path()
    if tool is None:
        print("SKIP: exp15 needs nbdsched-load next to the daemon (tools/load in its build tree)")
        sys.exit(77)
    runtime, reps = (0.3, 1) if a.quick else (2, 7)
    workloads = QUICK_WORKLOADS if a.quick else WORKLOADS
    facts = report.Facts()
    with TempDir("e15") as tmp, servers.Fleet() as srv:
        peers_run.start(srv, tmp, None, peers=("nbdkit", "nbdkit-t1"))
        peers_run.prefill(srv, list(srv.keys()), "16m" if a.quick else "1g")
        samples, commands, failures = peers_run.measure_light(srv, workloads, reps, runtime, tool, tmp, "exp15")
    med = common.medians({k: list(v.values()) for k, v in samples.items()})
    text, (within, measured, met, judged) = exp6_report.targets_verdict(samples, workloads)
    verdict = [f"{text} Targets 1-3: **{met} of {judged}** cells met."]
    interval_table, counts = exp6_report.targets_interval_table(samples, workloads)
    verdict.append("The same cells with the interval that holds each median with 95% confidence, met or missed "
                   f"only when all of it is on one side of the goal:\n\n{interval_table}\n\n"
                   f"Met {counts['met']}, missed {counts['missed']}, undecided {counts['undecided']}.")
    costs, spread = exp6_report.sched_cost_interval_table(samples, workloads)
    verdict.append("Target 4 the same way: what cfq and bfq cost against `none` in the same repetition "
                   f"(throughput lost, or CPU added), within {exp6_report.SCHED_COST_BOUND:.0%} only when all of "
                   f"the interval is:\n\n{costs}\n\nWithin {spread['within']}, beyond {spread['beyond']}, "
                   f"undecided {spread['undecided']}. With the server the limit, what a policy costs per request "
                   "shows in the rate, where behind fio's limit it shows only in the server's CPU.")
    client = exp6_report.client_table(samples, workloads, client=CLIENT)
    if client:
        verdict.append(client)
    if failures:
        verdict.append("Runs that failed (the cell's median is over the other repetitions): " + "; ".join(failures))
    sections = ([(None, __doc__.strip()), ("Verdict", "\n\n".join(verdict))]
                + exp6_report.tables(med, workloads, peers_run.wl_name, SERVERS, client=CLIENT)
                + [("Method", f"{reps} repetitions of {runtime} s per server and cell, no ramp (nbdsched-load "
                    "counts from its first request); every export written once first by fio (1 MiB writes); "
                    "RAM everywhere (nbdsched `backend: ram` 1 GiB, `nbdkit memory 1G`). Mean latency is the "
                    "queue depth over the rate. The per-repetition numbers are in the .json beside this "
                    "report.")])
    summary = {"setup": f"RAM, nbdsched none/cfq/bfq vs nbdkit memory (16 threads, --threads 1), unix + tcp, the "
                        f"target cells driven by {CLIENT}, {reps} x {runtime} s",
               "seed": "-",
               "ours": f"targets 1-3: {met} of {judged} cells point-met, {counts['met']} met with 95% confidence; "
                       f"target 4 (cfq/bfq within 5% of none): {within} of {measured}"
                       + (f"; {len(failures)} runs failed" if failures else ""),
               "target": "1-3: >= 1x (qd1), 1.2x (1 MiB, randwrite qd64) the faster nbdkit, CPU <= 2/3 the cheaper",
               "status": "no result" if judged == 0 else
                         f"1-3: {'met' if met == judged else 'missed'} ({counts['met']} of {judged} with "
                         f"confidence); 4: {within} of {measured}"}
    print(report.write(NAME, "Experiment 15: the peers targets with a client that is not the limit", sections, facts,
                       commands, peers=True, quick=a.quick, summary=summary,
                       runs=exp6_report.runs_json(samples, peers_run.wl_name),
                       commands_note="The servers are experiment 14's; `nbdsched-load` is `tools/load/nbdsched-load` "
                                     "in the daemon's build tree, `$TMP` the run's scratch directory, and each "
                                     "repetition passes its number as `--seed`."))


if __name__ == "__main__":
    main()
