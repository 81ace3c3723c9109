"""What cfq and bfq cost a request against `none`, end to end, with the
device's memory taken out of the comparison. Not part of run-all.

On this host one daemon's RAM device can be served 10-20% slower than an
identical daemon's for as long as both run (two `none` servers side by
side: 1.04x and 1.21x in two runs with 4 KiB random reads of a filled
1 GiB device): a 4 KiB read of cold memory is about 40% of the daemon's
CPU a request, and how fast that memory is differs between processes
(where the virtual machine's memory lies on the host). Pairing samples in
time cancels drift, not that; it made experiment 15's target-4 cells
scatter by more than the 5% they judge. Here each server has a small
device, filled first, so its data stays in the processor's caches; the
servers are pinned to CPU 0 and the client to CPU 1; a second `none`
server is the control, which shows the resolution (a run whose control is
off by more than the bound judges nothing). A run's median still moves by
2-4 points between runs with fresh daemons: compare several runs' medians
(`--runs 5` makes five runs of each cell and adds the median of their
medians).

Each slice runs nbdsched-load on one server for --slice seconds, the
servers in an order rotated between rounds; each scheduler's ratio to
`none` in the same round (IOPS, and the daemon's CPU a request) is paired,
and the median of the rounds is given with the interval that holds it with
95% confidence (the sign test's).

  /usr/bin/python3 bench/sched_cost_probe.py --nbdsched build-rel/daemon/nbdsched \\
      --transport unix --transport tcp --workload randread,4k,64 --workload randwrite,4k,64

`--limits KEY=VALUE` sets daemon limits on every server (e.g. busy_poll=0
coalesce=0 for the event loop without its adaptive policies)."""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import exp6_report  # noqa: E402
import peers_run  # noqa: E402
from nbdsched_test import servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

SERVERS = [("none", "none"), ("cfq", "cfq"), ("bfq", "bfq"), ("none (control)", "none")]
BOUND = exp6_report.SCHED_COST_BOUND


def args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--nbdsched", required=True)
    p.add_argument("--load", help="nbdsched-load (default: tools/load in the daemon's build tree)")
    p.add_argument("--transport", action="append", choices=["unix", "tcp"])
    p.add_argument("--workload", action="append", help="rw,bs,qd (default randread,4k,64)")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--slice", type=float, default=0.5, help="seconds a server runs in a round")
    p.add_argument("--size", default="16MiB", help="each device's size (small: its data stays cached)")
    p.add_argument("--fill-seconds", type=float, default=0.5,
                   help="1 MiB writes into each device before measuring (a 1 GiB device wants 3 or more)")
    p.add_argument("--limits", action="append", default=[], help="KEY=VALUE for every server's limits")
    p.add_argument("--no-pin", action="store_true", help="leave the servers and the client unpinned")
    p.add_argument("--runs", type=int, default=1,
                   help="runs of each cell, each with fresh daemons; more than one adds the medians of their medians")
    p.add_argument("--out", help="also write the table (markdown) here")
    return p.parse_args()


def load_tool(a):
    if a.load:
        return a.load
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.nbdsched))), "tools/load/nbdsched-load")
    if not os.path.exists(tool):
        sys.exit(f"sched_cost_probe: no nbdsched-load at {tool} (give --load)")
    return tool


def run_load(tool, server, transport, rw, bs, qd, seconds, seed, pin):
    argv = (["taskset", "-c", "1"] if pin else []) + peers_run.load_argv(tool, server, transport, rw, bs, qd, seconds,
                                                                         seed)
    return json.loads(subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60 + 10 * seconds).stdout)


def measure(a, tool, transport, workload, tmp):
    """{server label: [(iops, cpu us a request) per round]} for one cell, fresh servers."""
    rw, bs, qd = workload.split(",")
    pin = not a.no_pin
    limits = {k: common.option_value(v) for k, v in (kv.split("=", 1) for kv in a.limits)} or None
    with servers.Fleet() as srv:
        for i, (label, sched) in enumerate(SERVERS):
            srv[label] = servers.start_nbdsched(tmp, f"c{i}-{transport}", [common.ram_device("d", a.size, sched)],
                                                [{"name": "x", "device": "d"}], tcp=transport == "tcp",
                                                limits=limits)
            if pin:
                subprocess.run(["taskset", "-a", "-p", "-c", "0", str(srv[label].proc.pid)], check=True,
                               capture_output=True)
        for k in srv:   # fill: every read then finds data, every write a page
            run_load(tool, srv[k], transport, "write", "1m", 8, a.fill_seconds, 1, pin)
        keys = list(srv)
        samples = {k: [] for k in keys}
        for r in range(a.rounds):
            for k in peers_run.rotated(keys, r):
                cpu0 = srv[k].cpu()
                out = run_load(tool, srv[k], transport, rw, bs, int(qd), a.slice, r + 1, pin)
                samples[k].append((out["iops"], (srv[k].cpu() - cpu0) / out["requests"] * 1e6))
    return samples


def verdict(lo, hi, higher_is_better):
    """Target 4's verdict on a ratio's interval: the cost is the throughput
    lost, or the CPU added."""
    return exp6_report.sched_cost_verdict(*((1 - hi, 1 - lo) if higher_is_better else (lo - 1, hi - 1)))


def cell_rows(samples):
    rows = []
    for label, _ in SERVERS[1:]:
        for i, what, higher in ((0, "IOPS", True), (1, "CPU a request", False)):
            ratios = [b[i] / n[i] for n, b in zip(samples["none"], samples[label])]
            lo, hi, _ = common.median_interval(ratios)
            med = statistics.median(ratios)
            rows.append((label, what, med, lo, hi, verdict(lo, hi, higher)))
    return rows


def run_lines(cell, rows):
    """One run's table rows for a cell; a scheduler is judged only when the
    control matches `none` both ways (faster is a bias too)."""
    trusted = all(1 - BOUND <= r[3] and r[4] <= 1 + BOUND for r in rows if r[0] == "none (control)")
    lines = []
    for label, _ in SERVERS[1:]:
        iops, cpu = [r for r in rows if r[0] == label]
        judged = trusted or label == "none (control)"
        cells = [f"{r[2]:.3f} [{r[3]:.3f}, {r[4]:.3f}] {r[5] if judged else '(control off)'}" for r in (iops, cpu)]
        lines.append(f"| {cell} | {label} | {cells[0]} | {cells[1]} |")
    return lines


def across_runs(medians):
    """{(cell, label): [(iops ratio, cpu ratio) per run]} -> table rows:
    each run's median CPU a request over `none`'s, and their median."""
    lines = ["| cell | server | CPU a request over `none`'s, each run | median of the runs | IOPS, median |",
             "|---|---|---|---|---|"]
    for (cell, label), runs in medians.items():
        cpu = [c for _, c in runs]
        lines.append(f"| {cell} | {label} | {', '.join(f'{c - 1:+.1%}' for c in cpu)} | "
                     f"{statistics.median(cpu) - 1:+.1%} | {statistics.median(i for i, _ in runs) - 1:+.1%} |")
    return lines


def main():
    a = args()
    os.environ["NBDSCHED"] = os.path.abspath(a.nbdsched)   # what the test library starts
    tool = load_tool(a)
    lines = ["| cell | server | of `none`: IOPS | CPU a request |", "|---|---|---|---|"]
    medians = {}
    with TempDir("scp") as tmp:
        for transport in a.transport or ["unix"]:
            for workload in a.workload or ["randread,4k,64"]:
                cell = f"{transport} {workload.replace(',', ' ')}"
                for run in range(a.runs):
                    rows = cell_rows(measure(a, tool, transport, workload, tmp))
                    for label, _ in SERVERS[1:]:
                        iops, cpu = (r[2] for r in rows if r[0] == label)
                        medians.setdefault((cell, label), []).append((iops, cpu))
                    lines += run_lines(cell if a.runs == 1 else f"{cell}, run {run + 1}", rows)
                    print("\n".join(lines[-len(SERVERS) + 1:]), flush=True)
    text = (f"{a.rounds} rounds of {a.slice} s a server, {a.size} devices filled, "
            f"{'unpinned' if a.no_pin else 'servers on CPU 0, the client on CPU 1'}"
            f"{', limits ' + ' '.join(a.limits) if a.limits else ''}; medians of paired ratios to `none` "
            f"[95% interval]; within {BOUND:.0%} only when all of the interval is.\n\n" + "\n".join(lines))
    if a.runs > 1:
        text += (f"\n\nAcross the {a.runs} runs (fresh daemons each; a run's median moves between runs more than "
                 "its interval says):\n\n" + "\n".join(across_runs(medians)))
    print("\n" + text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
