"""Tables, verdict and plot of experiment 6 (kept apart from the runner)."""

import operator
import statistics

import common
import report

SERVERS = ["nbdsched-none", "nbdsched-cfq", "nbdsched-bfq", "nbdkit", "nbdkit-t1", "qemu-nbd", "nbd-server"]
NBDKITS = ("nbdkit", "nbdkit-t1")   # 16 threads (its default) and --threads 1
# A repetition's numbers in the samples' tuples, and their names in the report's .json (runs_json).
RUN_FIELDS = ("iops", "mib_s", "cpu_s_per_million", "lat_us", "client_cpu_s_per_million")


def _val(m, w):
    """IOPS for 4k, MiB/s for 1 MiB reads and writes."""
    if m is None:
        return None
    return m[1] if w[1] == "1m" else m[0]


def _fmt(v, base):
    if v is None:
        return "-"
    s = f"{v:,.0f}"
    if base:
        s += f" ({v / base:.2f})"
    return s


def _by_rep(samples, server, tr, w):
    """{repetition: throughput} of a server; "best-nbdkit": the faster
    nbdkit setting of each repetition."""
    i = 1 if w[1] == "1m" else 0
    if server != "best-nbdkit":
        return {rep: m[i] for rep, m in samples.get((server, tr, w), {}).items()}
    return {rep: v for rep, (v, _) in _better_nbdkit_by_rep(lambda k: _by_rep(samples, k, tr, w), operator.gt).items()}


def _better_nbdkit_by_rep(values_of, better):
    """{repetition: (value, setting)} of the nbdkit setting whose value
    (`values_of(setting)`: {repetition: value}) is better in that
    repetition; on a tie the first of NBDKITS."""
    best = {}
    for k in NBDKITS:
        for rep, v in values_of(k).items():
            if rep not in best or better(v, best[rep][0]):
                best[rep] = (v, k)
    return best


def _paired(samples, a, b, tr, w):
    """Median over the repetitions of a's throughput over b's in the same
    repetition (the servers ran back to back in it); None without a pair."""
    return common.ratio_by_rep(_by_rep(samples, a, tr, w), _by_rep(samples, b, tr, w))


def _cpu_by_rep(samples, server, tr, w):
    """{repetition: server CPU seconds per million requests}; "best-nbdkit":
    the cheaper nbdkit setting of each repetition."""
    if server != "best-nbdkit":
        return {rep: m[2] for rep, m in samples.get((server, tr, w), {}).items() if m[2] is not None}
    return {rep: v for rep, (v, _) in _better_nbdkit_by_rep(lambda k: _cpu_by_rep(samples, k, tr, w), operator.lt).items()}


# The targets: (what, workload, goal, higher is better).
TARGETS = [
    ("1: 4k randread qd1", ("randread", "4k", 1, 1), 1.0, True),
    ("2: 1 MiB read qd8", ("read", "1m", 8, 1), 1.2, True),
    ("2: 1 MiB write qd8", ("write", "1m", 8, 1), 1.2, True),
    ("3: 4k randwrite qd64", ("randwrite", "4k", 64, 1), 1.2, True),
    ("3: server CPU per 4k randread qd64", ("randread", "4k", 64, 1), 2 / 3, False),
]


SCHED_COST_BOUND = 0.05   # target 4: cfq and bfq within 5% of none on each target's cell


def _sched_costs(samples, sched, tr, w, higher):
    """Per repetition, how much worse cfq or bfq is than `none` in it: the
    throughput it loses, or (for a CPU target) the CPU it adds; None
    unmeasured."""
    if higher:
        ratios = common.ratios_by_rep(_by_rep(samples, f"nbdsched-{sched}", tr, w),
                                      _by_rep(samples, "nbdsched-none", tr, w))
        return ratios and [1 - r for r in ratios]
    ratios = common.ratios_by_rep(_cpu_by_rep(samples, f"nbdsched-{sched}", tr, w),
                                  _cpu_by_rep(samples, "nbdsched-none", tr, w))
    return ratios and [r - 1 for r in ratios]


def _sched_cost(samples, sched, tr, w, higher):
    """The median of _sched_costs, or None unmeasured."""
    costs = _sched_costs(samples, sched, tr, w, higher)
    return statistics.median(costs) if costs else None


def sched_cost_verdict(low, high):
    """Target 4's verdict on the interval of what a policy costs against
    `none` (a fraction: throughput lost or CPU added): within when all of it
    is inside the bound, beyond when all of it is outside."""
    return "within" if high <= SCHED_COST_BOUND else "beyond" if low > SCHED_COST_BOUND else "undecided"


def _goal_text(goal, higher):
    return f"{'>=' if higher else '<='} {goal:.2f}x"


def _target_ratios(samples, tr, w, higher):
    """Per repetition, nbdsched `none` against the better nbdkit setting of
    that repetition: throughput over the faster's, or (higher False) CPU per
    request over the cheaper's; None unmeasured."""
    if higher:
        return common.ratios_by_rep(_by_rep(samples, "nbdsched-none", tr, w), _by_rep(samples, "best-nbdkit", tr, w))
    return common.ratios_by_rep(_cpu_by_rep(samples, "nbdsched-none", tr, w),
                                _cpu_by_rep(samples, "best-nbdkit", tr, w))


def targets_table(samples, workloads):
    """The target table: nbdsched `none` against the better nbdkit setting of
    each repetition, paired, Unix and TCP; and target 4, what cfq and bfq
    cost against `none` in the same cells. Returns (table, costs within the
    bound, costs measured, target cells met, target cells measured)."""
    rows = []
    within = measured = met = judged = 0
    for what, w, goal, higher in TARGETS:
        if w not in workloads:
            continue
        row = [what, _goal_text(goal, higher)]
        costs = []
        for tr in ("unix", "tcp"):
            ratios = _target_ratios(samples, tr, w, higher)
            r = None if ratios is None else statistics.median(ratios)
            ok = r is not None and (r >= goal if higher else r <= goal)
            judged += r is not None
            met += ok
            row.append("-" if r is None else f"{r:.2f}x " + ("met" if ok else "missed"))
            for sched in ("cfq", "bfq"):
                c = _sched_cost(samples, sched, tr, w, higher)
                if c is not None:
                    measured += 1
                    within += c <= SCHED_COST_BOUND
                    costs.append(f"{tr} {sched} {c:+.0%}")
        row.append(", ".join(costs) or "-")
        rows.append(row)
    table = report.table(["target", "goal", "Unix", "TCP", "4: cfq / bfq cost against none"], rows)
    return table, within, measured, met, judged


def targets_verdict(samples, workloads):
    """The verdict's paragraph on the targets (experiments 6 and 14), and
    targets_table's counts: (within, measured, met, judged)."""
    table, *counts = targets_table(samples, workloads)
    within, measured = counts[:2]
    return ("The issue's targets, nbdsched `none` against the better nbdkit setting of each repetition "
            "(throughput: the faster; CPU: the cheaper), median of the repetitions' ratios; the last "
            "column is target 4, what cfq and bfq cost against `none` in the same cells (throughput "
            f"lost, or CPU added; paired):\n\n{table}\n\nTarget 4 (cfq and bfq within {SCHED_COST_BOUND:.0%} of "
            f"`none` on each of these cells): {within} of {measured} within the bound."), tuple(counts)


def targets_interval_table(samples, workloads, confidence=0.95):
    """Targets 1-3 judged on a run's repetitions, or several runs' pooled: per
    cell the median ratio and the interval that holds the median with
    `confidence` (common.median_interval); met when the whole interval is on
    the goal's side, missed when it is all on the other, else undecided: the
    machine's noise is wider than the distance to the goal. Returns (table,
    {"met": n, "missed": n, "undecided": n})."""
    rows, counts = [], {"met": 0, "missed": 0, "undecided": 0}
    for what, w, goal, higher in TARGETS:
        if w not in workloads:
            continue
        row = [what, _goal_text(goal, higher)]
        for tr in ("unix", "tcp"):
            ratios = _target_ratios(samples, tr, w, higher)
            interval = ratios and common.median_interval(ratios, confidence)
            if not interval:
                row.append("-")
                continue
            low, high, _ = interval
            good, bad = (low >= goal, high < goal) if higher else (high <= goal, low > goal)
            verdict = "met" if good else "missed" if bad else "undecided"
            counts[verdict] += 1
            row.append(f"{statistics.median(ratios):.2f}x [{low:.2f}, {high:.2f}] of {len(ratios)}: {verdict}")
        rows.append(row)
    return report.table(["target", "goal", "Unix", "TCP"], rows), counts


def sched_cost_interval_table(samples, workloads, confidence=0.95):
    """Target 4 judged like targets_interval_table: per cell, transport and
    policy, what cfq or bfq costs against `none` in the same repetition
    (throughput lost, or CPU added), the median and the interval holding it
    with `confidence`; within when the whole interval is inside the bound,
    beyond when all of it is outside, else undecided. Returns (table,
    {"within": n, "beyond": n, "undecided": n})."""
    rows, counts = [], {"within": 0, "beyond": 0, "undecided": 0}
    for what, w, _, higher in TARGETS:
        if w not in workloads:
            continue
        row = [what]
        for tr in ("unix", "tcp"):
            for sched in ("cfq", "bfq"):
                costs = _sched_costs(samples, sched, tr, w, higher)
                interval = costs and common.median_interval(costs, confidence)
                if not interval:
                    row.append("-")
                    continue
                low, high, _ = interval
                verdict = sched_cost_verdict(low, high)
                counts[verdict] += 1
                row.append(f"{statistics.median(costs):+.1%} [{low:+.1%}, {high:+.1%}]: {verdict}")
        rows.append(row)
    return report.table(["target cell", "Unix cfq", "Unix bfq", "TCP cfq", "TCP bfq"], rows), counts


# What the client table says first, by client.
CLIENT_TEXT = {
    "fio": ("Where the client is the limit. fio runs each job on one thread; where that thread keeps its core "
           "busy (near 1.00) the rate is its core over its CPU per request, and a server goes faster only by "
           "costing fio less per request. If fio were the limit against both servers, the ratio would be the "
           "last column: what fio spends per request against the faster nbdkit over what it spends against "
           "nbdsched (paired by repetition; fio's CPU per request is itself higher where it waits more)."),
    "nbdsched-load": ("Whether the client is the limit. nbdsched-load sends every free slot's request in one system "
                      "call and reads every reply that has arrived in another, so at a deep queue it costs a "
                      "fraction of what fio does per request (at one request at a time there is nothing to batch, "
                      "and it costs about as much); where its share of a core stays well below 1.00 the server "
                      "sets the rate. The last column is still the ratio the client would allow if it were the "
                      "limit against both."),
}


def _client_by_rep(samples, server, tr, w):
    """{repetition: (the client's CPU µs per request, share of a core it
    kept busy)} where the client's CPU was recorded; "best-nbdkit": the faster nbdkit
    setting of each repetition's."""
    if server == "best-nbdkit":
        faster = _better_nbdkit_by_rep(lambda k: _by_rep(samples, k, tr, w), operator.gt)
        return {rep: c for rep, (_, k) in faster.items()
                if (c := _client_by_rep(samples, k, tr, w).get(rep)) is not None}
    return {rep: (m[4], m[4] * m[0] / 1e6) for rep, m in samples.get((server, tr, w), {}).items()
            if len(m) > 4 and m[4] is not None}


def client_table(samples, workloads, confidence=0.95, client="fio"):
    """For the throughput targets: how busy the client (fio, or
    nbdsched-load in experiment 15) kept its core against nbdsched `none`
    and against the faster nbdkit setting, its CPU per request against each
    (medians of the repetitions), and the ratio that CPU sets when the
    client is the limit: its µs per request against nbdkit over against
    nbdsched, paired, with the interval of its median. None when no run
    recorded the client's CPU."""
    rows = []
    for what, w, goal, higher in TARGETS:
        if w not in workloads or not higher:
            continue
        for tr in ("unix", "tcp"):
            ours = _client_by_rep(samples, "nbdsched-none", tr, w)
            kit = _client_by_rep(samples, "best-nbdkit", tr, w)
            reps = sorted(set(ours) & set(kit))
            if not reps:
                continue
            bound = [kit[r][0] / ours[r][0] for r in reps if ours[r][0]]
            interval = common.median_interval(bound, confidence)
            med = statistics.median
            rows.append([what, tr, f"{med(ours[r][1] for r in reps):.2f}", f"{med(kit[r][1] for r in reps):.2f}",
                         f"{med(ours[r][0] for r in reps):.1f}", f"{med(kit[r][0] for r in reps):.1f}",
                         f"{med(bound):.2f}x" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")
                         + f" of {len(bound)}"])
    if not rows:
        return None
    header = ["target", "transport", f"{client} busy: nbdsched", f"{client} busy: faster nbdkit",
              f"{client} µs/request: nbdsched", f"{client} µs/request: nbdkit",
              f"ratio at {client}'s limit (nbdkit's µs over nbdsched's)"]
    return CLIENT_TEXT[client] + "\n\n" + report.table(header, rows)


def _best_base(med, tr, w):
    """The faster nbdkit setting's median: what the tables' brackets divide by."""
    return max((_val(med.get((k, tr, w)), w) or 0 for k in NBDKITS), default=0) or None


# How the client's CPU is counted, by client (the client CPU table's note).
CLIENT_CPU_NOTE = {
    "fio": "one thread per job; the ramp not counted",
    "nbdsched-load": "one thread; the connection's set-up not counted",
}


def tables(med, workloads, wl_name, servers, client="fio"):
    """The sections of throughput (with fio on /dev/shm as the limit, where
    measured) and of server and client CPU per request, Unix and TCP, for
    these servers."""
    shm = any(("direct", "shm", w) in med for w in workloads)
    sections = []
    for tr in ("unix", "tcp"):
        rows = []
        for w in workloads:
            base = _best_base(med, tr, w)
            row = [wl_name(w) + (" (MiB/s)" if w[1] == "1m" else "")]
            row += [_fmt(_val(med.get((s, tr, w)), w), base) for s in servers]
            if shm:
                row.append(_fmt(_val(med.get(("direct", "shm", w)), w), base))
            rows.append(row)
        sections.append((f"IOPS over {'a Unix socket' if tr == 'unix' else 'TCP loopback'} "
                         "(median of the repetitions; in brackets: ratio to the faster nbdkit setting's median)",
                         report.table(["workload"] + servers + (["fio on /dev/shm (no protocol)"] if shm else []),
                                      rows)))
    for tr in ("unix", "tcp"):
        rows = []
        for w in workloads:
            row = [wl_name(w)]
            for s in servers:
                m = med.get((s, tr, w))
                row.append(f"{m[2]:.1f}" if m and m[2] is not None else "-")
            rows.append(row)
        sections.append((f"Server CPU seconds per million requests ({'Unix socket' if tr == 'unix' else 'TCP'}, median)",
                         report.table(["workload"] + servers, rows)))
    sections[-1] = (sections[-1][0], sections[-1][1] +
                    f"\n\nThe server process's utime+stime over the {client} run (connection setup included) "
                    f"divided by the requests {client} completed. nbdkit and qemu-nbd use worker threads, and "
                    "nbd-server a process per connection (its CPU counts them); nbdsched runs one event loop "
                    "per device up to one per CPU (docs/threads.md); with the one device here, one thread "
                    "serves every connection.")
    for tr in ("unix", "tcp"):
        rows = [[wl_name(w)] + [_client_cell(med.get((s, tr, w))) for s in servers] for w in workloads]
        sections.append((f"{client}'s own CPU seconds per million requests ({'Unix socket' if tr == 'unix' else 'TCP'}, "
                         f"median; in brackets: the share of one core {client} kept busy)",
                         report.table(["workload"] + servers, rows)))
    sections[-1] = (sections[-1][0], sections[-1][1] +
                    f"\n\n{client}'s user and system time ({CLIENT_CPU_NOTE[client]}) divided by the requests it "
                    f"completed. Where {client} keeps a core busy (near 1.00) the client, not the server, sets the "
                    f"rate: a server then goes faster only by costing {client} less per request.")
    return sections


def _client_cell(m):
    """fio's CPU per request and the share of a core it kept busy (the
    median cost times the median rate), or "-" for runs that did not
    record it."""
    if not m or len(m) < 5 or m[4] is None:
        return "-"
    return f"{m[4]:.1f} ({m[4] * m[0] / 1e6:.2f})"


def runs_json(samples, wl_name):
    """Every repetition's numbers, by cell, for the report's .json."""
    return {f"{srv} {tr} {wl_name(w)}": [
        dict(zip(("repetition",) + RUN_FIELDS,
                 (rep + 1, *(None if x is None else round(x, 2) for x in m)))) for rep, m in sorted(by_rep.items())]
        for (srv, tr, w), by_rep in samples.items()}


def write(name, quick, facts, med, workloads, reps, runtime, commands, wl_name, failures, samples):
    """med: {(server, transport, workload): medians}; samples: the same keys,
    {repetition: numbers}, which every ratio of the verdict pairs."""
    from exp6_peers import __doc__ as doc
    sections = [(None, doc.strip())] + tables(med, workloads, wl_name, SERVERS)
    # targets
    w64 = ("randread", "4k", 64, 1)
    v = {s: _val(med.get((s, "unix", w64)), w64) for s in SERVERS}
    verdict = []
    result = {}
    r = _paired(samples, "nbdsched-none", "best-nbdkit", "unix", w64)
    if r is not None:
        result["none_vs_nbdkit"] = r
        verdict.append(f"nbdsched `none` vs nbdkit memory, the faster of its two thread settings in each "
                       f"repetition, 4k randread qd64, Unix socket: **{r:.2f}x** (median of the repetitions' "
                       f"ratios; medians {v['nbdsched-none']:,.0f} vs {v['nbdkit'] or 0:,.0f} (16 threads) and "
                       f"{v['nbdkit-t1'] or 0:,.0f} (`--threads 1`) IOPS): target >= 1x "
                       f"**{'met' if r >= 1 else 'missed'}**, aim 1.5x **{'met' if r >= 1.5 else 'missed'}**.")
    costs = []
    for w in workloads:
        if w[2] != 64:
            continue
        for tr in ("unix", "tcp"):
            for s in ("cfq", "bfq"):
                x = _paired(samples, f"nbdsched-{s}", "nbdsched-none", tr, w)
                if x is not None:
                    costs.append((s, tr, wl_name(w), 1 - x))
    if costs:
        # One cell is one median of 3 runs and swings by +-15% on a shared
        # machine (negative "costs" as large as positive ones); the mean over
        # the 8 qd64 cells of a scheduler is what the target is judged on,
        # the worst cell is reported beside it.
        worst = max(costs, key=lambda c: c[3])
        mean = {s: sum(c[3] for c in costs if c[0] == s) / max(1, sum(1 for c in costs if c[0] == s))
                for s in ("cfq", "bfq")}
        ok = all(m <= 0.10 for m in mean.values())
        result["sched_cost_worst"] = worst
        result["sched_cost_mean"] = mean
        verdict.append("cfq/bfq throughput cost vs `none` at iodepth 64 (RAM; positive = slower than `none`; each cell "
                       "the median of the repetitions' ratios to `none` in the same repetition): "
                       + ", ".join(f"{s} {tr} {wl}: {c:+.0%}" for s, tr, wl, c in costs) +
                       ". Mean over the 8 cells: " + ", ".join(f"{s} {m:+.1%}" for s, m in mean.items()) +
                       f" — target <= 10% **{'met' if ok else 'missed'}** (worst single cell {worst[0]} {worst[1]} "
                       f"{worst[2]} {worst[3]:+.0%}). On a shared machine one cell swings by tens of percent between "
                       "repetitions (negative costs of the same size are that noise), so the target is judged on "
                       "the mean; the CPU per request table is the steadier measure of what the schedulers cost, "
                       "and experiment 7 measures it directly.")
        result["sched_ok"] = ok
    verdict.append(targets_verdict(samples, workloads)[0])
    if failures:
        verdict.append("Runs that failed or hung (fio killed after a timeout; the cell's median is over "
                       "the other repetitions): " + "; ".join(failures))
    sections.append(("Verdict", "\n\n".join(verdict)))
    sections.append(("Method", f"{reps} repetitions of {runtime} s per job after a 0.2 s ramp (connection set-up, fio's threads "
                     "starting). Every export is written once before the first job (1 MiB writes): reads copy "
                     "data, and no job pays a server's first touch of its memory (17-24 ms per 2 MiB huge page "
                     "on this host, bench/results/data-path.md). "
                     "RAM everywhere: nbdsched `backend: ram` 1 GiB, `nbdkit memory 1G`, qemu-nbd "
                     "(`--shared=64 -f raw`) and nbd-server (a process per connection, `flush` and `trim` on) on "
                     "one 1 GiB /dev/shm file (written by the prefill). The no-protocol row is fio's "
                     "libaio engine on that file (tmpfs: no O_DIRECT, so libaio completes synchronously)."))
    labels = [wl_name(w) for w in workloads]
    series = []
    for s in SERVERS + ["direct"]:
        tr = "shm" if s == "direct" else "unix"
        vals = []
        for w in workloads:
            base = _best_base(med, "unix", w)
            x = _val(med.get((s, tr, w)), w)
            vals.append(x / base if x and base else 0)
        series.append((s if s != "direct" else "fio on /dev/shm", vals))
    report.bars(report.plot_path(name, quick), "Unix socket: throughput relative to the faster nbdkit memory setting (=1)",
                labels, series, "ratio to nbdkit")
    print(report.write(name, "Experiment 6: protocol overhead against nbdkit, qemu-nbd and nbd-server", sections, facts,
                       commands, peers=True, quick=quick,
                       summary=summary_row(result, failures),
                       runs=runs_json(samples, wl_name)))
    return result


def summary_row(result, failures):
    """The row of results/README.md. A target whose cells are missing (every
    run of nbdkit, or of `none`, failed) says "no result", never 0.00x or
    missed."""
    r = result.get("none_vs_nbdkit")
    ours = f"none / best nbdkit, 4k randread qd64 unix: {f'{r:.2f}x' if r is not None else 'no result'}"
    if "sched_cost_mean" in result:
        ours += ("; scheduler cost at qd64, mean of 8 cells: " +
                 ", ".join(f"{s} {m:+.1%}" for s, m in result["sched_cost_mean"].items()) +
                 f" (worst cell {result['sched_cost_worst'][3]:+.0%})")
    else:
        ours += "; scheduler cost: no result"
    if failures:
        ours += f"; {len(failures)} runs failed (see the report)"
    status = ("no result" if r is None else "met" if r >= 1 else "missed") + " / " + \
        ("no result" if "sched_ok" not in result else "met" if result["sched_ok"] else "missed")
    return {"setup": "RAM, nbdsched none/cfq/bfq vs nbdkit memory (16 threads, --threads 1) vs qemu-nbd vs nbd-server, unix + tcp",
            "seed": "-",
            "ours": ours, "target": ">= 1x the faster nbdkit setting (aim 1.5x); cfq/bfq <= 10% below none at qd64 (mean of the cells)",
            "status": status}
