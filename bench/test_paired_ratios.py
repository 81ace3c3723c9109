"""The experiments' ratios pair repetition i of one side with repetition i of
the other (they ran interleaved, seconds apart) and take the median of those
ratios, never the ratio of two medians; a run that completed no request
fails instead of counting as 0 (a -100% cost, a 0.00x ratio), and a summary
row whose reference never ran says "no result", not 0.00x.

Usage: test_paired_ratios.py BENCH_DIR (the bench/ whose scripts to test)
"""
import os
import sys

BENCH = os.path.abspath(sys.argv[1])
sys.path[:0] = [BENCH, os.path.join(BENCH, "lib"), os.path.join(os.path.dirname(BENCH), "tests", "lib", "python")]
import exp10_request_pool  # noqa: E402
import exp12_rbd  # noqa: E402
import exp6_report  # noqa: E402
import exp11_report  # noqa: E402
import exp8_file_io  # noqa: E402
import exp7_sched_cost  # noqa: E402
import exp14_peer_targets  # noqa: E402
import peers_run  # noqa: E402
import targets_pooled  # noqa: E402
import common  # noqa: E402
import sched_bench  # noqa: E402
from nbdsched_test import fio  # noqa: E402

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def fake_run(ios, cpu):
    side = {"iops": ios / 5.0, "bw": 0, "total_ios": ios, "lat_ns": {"mean": 1000, "stddev": 0}}
    idle = {"iops": 0.0, "bw": 0, "total_ios": 0, "lat_ns": {"mean": 0, "stddev": 0}}
    return fio.Result(["fio"], {"jobs": [{"jobname": "c", "read": side, "write": idle}]}, 5.0, [cpu])


def test_exp7_costs():
    # CPU us per request of three repetitions: medians 5.0 (none) and 5.5 (bfq) would say +10%;
    # repetition by repetition bfq costs +50%, -8.3% and +5%: median +5%.
    none = [(100.0, 4.0), (100.0, 6.0), (100.0, 5.0)]
    bfq = [(50.0, 6.0), (100.0, 5.5), (100.0, 5.25)]
    measured = {(1, "none"): none, (1, "cfq"): none, (1, "bfq"): bfq}
    cost, cpu_cost = exp7_sched_cost.costs(measured, [1])
    check(abs(cpu_cost[(1, "bfq")] - 0.05) < 1e-9, f"exp7 CPU cost: median of paired ratios +5.0% "
          f"(got {cpu_cost[(1, 'bfq')]:+.1%}; the ratio of medians would be +10.0%)")
    check(abs(cost[(1, "bfq")]) < 1e-9 and cost[(1, "cfq")] == 0, f"exp7 throughput cost paired: {cost}")
    try:
        exp7_sched_cost.measure(fake_run(0, 1.0))
        check(False, "exp7: a run with no request fails (not 0 us per request, a -100% cost)")
    except RuntimeError as e:
        check("no request" in str(e), f"exp7: a run with no request fails: {e}")
    check(exp7_sched_cost.measure(fake_run(1000, 0.01))[1] == 10.0, "exp7: 0.01 s over 1000 requests is 10 us")


def test_exp12_ratios():
    # exp12's committed randread 4k qd64 repetitions: the medians give 19746 / 18960 = 1.04x (over the
    # 0.9x target); repetition by repetition nbdsched made 0.90x, 1.04x and 0.89x of fio-rbd.
    def reps(*iops):
        return [{"iops": x} for x in iops]
    by_server = {"nbdsched": reps(24979, 19746, 13811), "fio-rbd": reps(27823, 18960, 15584),
                 "fio-rbd-nocache": reps(1, 1, 1), "qemu-nbd": reps(1, 1, 1)}
    r = exp12_rbd.paired(by_server, "nbdsched", "fio-rbd")
    check(0.89 < r < 0.905, f"exp12: median of paired ratios 0.90x (got {r:.3f}x; ratio of medians 1.04x)")
    row = exp12_rbd.summary({"randread 4k qd64": by_server})
    check(row["ours"].startswith("vs fio-rbd: 0.90x") and row["status"] == "not met", f"exp12 summary: {row}")
    try:
        exp12_rbd.paired(dict(by_server, **{"fio-rbd": reps(27823, 0, 15584)}), "nbdsched", "fio-rbd")
        check(False, "exp12: a repetition without I/O fails (not an infinite ratio)")
    except RuntimeError as e:
        check("without I/O" in str(e), f"exp12: a repetition without I/O fails: {e}")


def test_exp6_summary_row():
    ok = {"none_vs_nbdkit": 1.06, "sched_cost_mean": {"cfq": -0.028, "bfq": -0.093},
          "sched_cost_worst": ("bfq", "tcp", "x", 0.24), "sched_ok": True}
    row = exp6_report.summary_row(ok, [])
    check(row["ours"] == "none / best nbdkit, 4k randread qd64 unix: 1.06x; scheduler cost at qd64, mean of 8 cells: "
          "cfq -2.8%, bfq -9.3% (worst cell +24%)" and row["status"] == "met / met", f"exp6 row: {row}")
    row = exp6_report.summary_row({}, ["nbdkit over unix, randread 4k qd64 x1, repetition 1: fio failed"])
    check("0.00x" not in row["ours"] and "no result" in row["ours"] and "1 runs failed" in row["ours"]
          and row["status"] == "no result / no result", f"exp6 row without nbdkit: {row}")


def test_exp6_paired():
    w = ("randread", "4k", 64, 1)
    # medians 110 vs 100 (1.10x); repetition by repetition 0.80x, 0.92x, 1.25x: 0.92x. Repetition 2 of
    # nbdkit failed in the second case: the ratio pairs repetitions 1 and 3 only.
    samples = {("nbdsched-none", "unix", w): {0: (80.0,), 1: (110.0,), 2: (125.0,)},
               ("nbdkit", "unix", w): {0: (100.0,), 1: (120.0,), 2: (100.0,)}}
    r = exp6_report._paired(samples, "nbdsched-none", "nbdkit", "unix", w)
    check(abs(r - 110 / 120) < 1e-9, f"exp6: median of paired ratios 0.92x (got {r:.3f}x; ratio of medians 1.10x)")
    del samples[("nbdkit", "unix", w)][1]
    r = exp6_report._paired(samples, "nbdsched-none", "nbdkit", "unix", w)
    check(abs(r - (0.8 + 1.25) / 2) < 1e-9, f"exp6: a failed repetition is left out of both sides (got {r:.3f}x)")
    check(exp6_report._paired(samples, "nbdsched-none", "qemu-nbd", "unix", w) is None, "exp6: no pair, no ratio")
    # The target's reference is the faster nbdkit setting of each repetition: 1.20x against 16 threads,
    # but --threads 1 was faster in repetitions 1 and 2 (16 threads failed in 2): 0.92x, 0.92x, 1.25x.
    samples[("nbdsched-none", "unix", w)] = {0: (120.0,), 1: (110.0,), 2: (125.0,)}
    samples[("nbdkit-t1", "unix", w)] = {0: (130.0,), 1: (120.0,), 2: (90.0,)}
    check(abs(exp6_report._paired(samples, "nbdsched-none", "nbdkit", "unix", w) - 1.225) < 1e-9,
          "exp6: against 16 threads alone 1.23x")
    r = exp6_report._paired(samples, "nbdsched-none", "best-nbdkit", "unix", w)
    check(abs(r - 120 / 130) < 1e-9, f"exp6: against the faster nbdkit of each repetition 0.92x (got {r:.3f}x)")


def test_exp6_targets():
    # 1 MiB write: 1.25x, 1.10x, 1.30x of the faster nbdkit: 1.25x, met. CPU per randread qd64: nbdsched
    # 4.0 us; the cheaper nbdkit per repetition 6.0 (t1), 5.0 (16 threads), 6.5 (t1): 0.67x, 0.80x,
    # 0.62x -> 0.67x, met (<= 2/3 + rounding: 0.6667 is the goal itself). TCP has no samples: "-".
    wr, rr = ("write", "1m", 8, 1), ("randread", "4k", 64, 1)
    samples = {("nbdsched-none", "unix", wr): {0: (0, 125.0, None), 1: (0, 110.0, None), 2: (0, 130.0, None)},
               ("nbdkit", "unix", wr): {0: (0, 100.0, None), 1: (0, 100.0, None), 2: (0, 90.0, None)},
               ("nbdkit-t1", "unix", wr): {0: (0, 80.0, None), 1: (0, 90.0, None), 2: (0, 100.0, None)},
               ("nbdsched-none", "unix", rr): {0: (9, 0, 4.0), 1: (9, 0, 4.0), 2: (9, 0, 4.0)},
               ("nbdkit", "unix", rr): {0: (9, 0, 7.0), 1: (9, 0, 5.0), 2: (9, 0, 7.0)},
               ("nbdkit-t1", "unix", rr): {0: (9, 0, 6.0), 1: (9, 0, 5.5), 2: (9, 0, 6.5)}}
    # Target 4: cfq's 1 MiB writes 120, 99, 130 against none's 125, 110, 130: 0.96x, 0.90x, 1.00x -> 4% lost,
    # within 5%; its CPU per randread 4.4 against 4.0 in each repetition: 10% more, not within.
    samples[("nbdsched-cfq", "unix", wr)] = {0: (0, 120.0, None), 1: (0, 99.0, None), 2: (0, 130.0, None)}
    samples[("nbdsched-cfq", "unix", rr)] = {r: (9, 0, 4.4) for r in range(3)}
    text, within, measured, met, judged = exp6_report.targets_table(samples, [wr, rr])
    check("| 2: 1 MiB write qd8 | >= 1.20x | 1.25x met | - | unix cfq +4% |" in text,
          f"exp6 target: 1 MiB write 1.25x met, cfq 4% below none ({text})")
    check("| 3: server CPU per 4k randread qd64 | <= 0.67x | 0.67x met | - | unix cfq +10% |" in text,
          f"exp6 target: CPU against the cheaper nbdkit of each repetition 0.67x, cfq's CPU 10% over none ({text})")
    check((within, measured) == (1, 2), f"exp6 target 4: 1 of 2 cells within 5% (got {within} of {measured})")
    check((met, judged) == (2, 2), f"exp6 targets: both measured cells met (got {met} of {judged})")
    check("randread qd1" not in text, "exp6 target: a workload that did not run has no row")
    samples[("nbdsched-none", "unix", rr)][1] = (9, 0, 4.5)   # 0.90x in repetition 2: median 0.67 -> 0.67
    samples[("nbdsched-none", "unix", rr)][0] = (9, 0, 4.2)   # 0.70x, 0.90x, 0.62x: median 0.70x
    text, _, _, met, judged = exp6_report.targets_table(samples, [wr, rr])
    check((met, judged) == (1, 2), f"exp6 targets: the CPU cell missed (got {met} of {judged} met)")
    check("| 3: server CPU per 4k randread qd64 | <= 0.67x | 0.70x missed | - | unix cfq +5% |" in text,
          f"exp6 target: CPU 0.70x missed ({text})")


def test_exp8_paired():
    w = ("randread", "4k", 64, True)
    # medians 20,000 vs 26,316 (0.76x); repetition by repetition 0.95x, 0.67x, 0.95x: 0.95x
    samples = {(exp8_file_io.URING, w): {0: (19000.0, 0, 5.0), 1: (20000.0, 0, 5.0), 2: (25000.0, 0, 5.0)},
               (exp8_file_io.RAW[0], w): {0: (20000.0, 0, None), 1: (30000.0, 0, None), 2: (26315.8, 0, None)}}
    r = exp8_file_io.paired(samples, exp8_file_io.URING, exp8_file_io.RAW[0], w)
    check(abs(r - 0.95) < 1e-3, f"exp8: median of paired ratios 0.95x (got {r:.3f}x; ratio of medians 0.76x)")


def test_exp8_cpu_arithmetic():
    # medians: nbdsched 70k IOPS at 13 + 8 us, fio on the file 150k. 0.9x is 135k IOPS: 2 CPUs leave
    # 14.8 us an I/O and the client 7.4 us; 2e6 / 21 = 95,238 IOPS (0.63x), the client alone 76,923
    # (0.51x), busy 0.91 of a CPU: the client is the limit.
    def runs(iops, client, server, host, reps=(0, 1, 2)):
        return {rep: {"iops": x, "client": client, "server": server, "host": host, "interrupts": 1.5}
                for rep, x in zip(reps, (iops - 5, iops, iops + 5))}
    cpu = {exp8_file_io.URING: runs(70000, 13.0, 8.0, 30.0), exp8_file_io.RAW[0]: runs(150000, 7.0, 0.0, 12.0)}
    text = exp8_file_io.cpu_section(cpu)
    for want in ("135,000 IOPS", "14.8 µs of CPU per I/O", "7.4 µs for the client", "at most 95,238 IOPS (0.63x",
                 "at most 76,923 (0.51x)", "busy 91% of the time: the client is the limit",
                 "| nbdsched io_uring | 70,000 | 13.0 | 8.0 | 1.5 | 21.0 | 0.91 | 1.47 | 30.0 | 2.10 | 0.63 |"):
        check(want in text, f"exp8 CPU arithmetic says {want!r}")
    check("With a client that is not the limit" not in text,
          "exp8 CPU table without nbdsched-load: no light-client paragraph")
    # nbdsched-load in repetitions 1 and 2 only (180,000 and 180,005 IOPS): paired with fio on the
    # file's 150,000 and 150,005 there, not with repetition 0's 149,995; the median of two ratios
    cpu[exp8_file_io.LIGHT] = runs(180005, 1.0, 4.5, 6.0, reps=(1, 2, 3))
    del cpu[exp8_file_io.LIGHT][3]
    r = exp8_file_io.light_vs_raw(cpu)
    want = (180000 / 150000 + 180005 / 150005) / 2
    check(r is not None and abs(r - want) < 1e-9, f"exp8: nbdsched-load paired by repetition {want:.4f}x (got {r})")
    text = exp8_file_io.cpu_section(cpu)
    check("| nbdsched io_uring, nbdsched-load client | 180,002 | 1.0 | 4.5 |" in text and
          f"{want:.2f}x of fio" in text, "exp8 CPU table has the nbdsched-load row and its ratio")
    check(exp8_file_io.cpu_section({exp8_file_io.URING: cpu[exp8_file_io.URING]}).startswith("no result"),
          "exp8 CPU table without fio on the file: no result")


def test_exp11_paired():
    w = exp11_report.WORKLOADS[0]
    # medians 100 vs 80 (1.25x, met); repetition by repetition 0.91x, 1.25x, 0.83x: 0.91x (missed)
    samples = {("nbdsched-tls", "unix", w): {0: (100.0, 1, 1), 1: (100.0, 1, 1), 2: (100.0, 1, 1)},
               ("nbdkit-tls", "unix", w): {0: (110.0, 1, 1), 1: (80.0, 1, 1), 2: (120.0, 1, 1)}}
    text, ratios, met = exp11_report._verdict({}, [], samples)
    r = ratios[(w, "unix")]
    check(abs(r - 100 / 110) < 1e-9 and met == 0, f"exp11: median of paired ratios 0.91x (got {r:.3f}x, {met} met)")
    check(ratios[(w, "tcp")] is None and "tcp -" in text, "exp11: a cell without a pair has no ratio")


def test_exp10_rates():
    # One daemon's runs as fio 3.33 reported them (bench exp10, cfq, fair
    # pool): in the 12 s window the reader issued 580 requests and each of the
    # 8 flood clones 75 (each 205 alone); a clone's runtime then also counts
    # the 3.8 s it waited for the 64 it still had out, so fio's own iops said
    # 38 (104 alone) where the daemon served 50 (137 alone).
    def fake_run(g, jobs, servers=()):
        flooded = any(name == "reader" for name, _ in jobs)
        out = []
        for name, opts in jobs:
            ios, ms = (580, 12017) if name == "reader" else ((75, 15817) if flooded else (205, 15870))
            read = {"iops": ios * 1000 / ms, "bw": 0, "total_ios": ios, "runtime": ms,
                    "lat_ns": {"mean": 1000, "stddev": 0}}
            idle = {"iops": 0.0, "bw": 0, "total_ios": 0, "runtime": 0, "lat_ns": {"mean": 0, "stddev": 0}}
            out += [{"jobname": name, "read": read, "write": idle}] * int(opts.get("numjobs", 1))
        return fio.Result(fio.fio_command(g, jobs), {"jobs": out}, 19.0, [0.0])

    class FakeServer:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def uri(self, name):
            return f"nbd+unix:///{name}?socket=S"

    saved = (fio.run, exp10_request_pool.servers.start_nbdsched, exp10_request_pool.common.commands_for)
    fio.run = fake_run
    exp10_request_pool.servers.start_nbdsched = lambda *a, **k: FakeServer()
    exp10_request_pool.common.commands_for = lambda srv, runs: []
    try:
        out, _ = exp10_request_pool.run_pool(None, True, 12, 3, 64)
    finally:
        fio.run, exp10_request_pool.servers.start_nbdsched, exp10_request_pool.common.commands_for = saved
    reader, flood = out[("cfq", "flooded")][2:]
    alone = out[("cfq", "flood alone")][3]
    check(abs(reader - 580 / 12) < 0.01 and abs(flood - 50.0) < 0.01,
          f"exp10: reader and flooder over the 12 s window, 48.3 and 50.0 IOPS (got {reader:.1f} and {flood:.1f})")
    check(abs(alone - 8 * 205 / 12) < 0.01, f"exp10: the flooder alone over the window, 136.7 IOPS (got {alone:.1f})")


def test_exp14_own_cost():
    # The tool's medians: none 100 ns, cfq 200, bfq 600. `none`'s daemon CPU per request 8.0 us over Unix:
    # cfq adds 100 ns = +1.25%, bfq 500 ns = +6.25% (over the 5% bound); TCP unmeasured: no row.
    w = ("randread", "4k", 64, 1)
    real = sched_bench.ns_per_request
    sched_bench.ns_per_request = lambda args, runs: {"none": 100.0, "cfq": 200.0, "bfq": 600.0}
    try:
        text, within, count = exp14_peer_targets.own_cost_section({("nbdsched-none", "unix", w): (9, 0, 8.0, 1)}, [w], 3,
                                                                    1000)
    finally:
        sched_bench.ns_per_request = real
    check("| randread 4k qd64 x1, unix | 8.0 | +1.2% | +6.2% |" in text, f"exp14 own cost: +1.2% and +6.2% ({text})")
    check((within, count) == (1, 2), f"exp14 own cost: 1 of 2 within 5% (got {within} of {count})")
    check("tcp" not in text, "exp14 own cost: a cell that did not run has no row")
    sched_bench.ns_per_request = lambda args, runs: None
    try:
        check(exp14_peer_targets.own_cost_section({}, [w], 3, 1000) is None, "exp14 own cost: no tool, no section")
    finally:
        sched_bench.ns_per_request = real


def test_median_interval():
    check(common.median_interval([1, 2, 3, 4, 5]) is None, "median interval: 5 values cannot reach 95%")
    low, high, cover = common.median_interval([7, 1, 6, 2, 5, 3, 4])
    check((low, high) == (1, 7) and abs(cover - 126 / 128) < 1e-12,
          f"median interval: of 7 values, the lowest to the highest, 98.4% (got {low}, {high}, {cover:.4f})")
    low, high, cover = common.median_interval(list(range(1, 22)))
    check((low, high) == (6, 16) and cover >= 0.95,
          f"median interval: of 21 values, the 6th to the 16th (got {low}, {high}, {cover:.4f})")


def test_pooled_targets():
    # Two runs of 7 repetitions each of the 1 MiB write cell over Unix; nbdkit 100 MiB/s throughout (t1
    # slower), nbdsched per run and repetition below. Repetition numbers repeat between the runs: a ratio
    # must pair the same run's servers only.
    wr = ("write", "1m", 8, 1)

    def report(ours, kit):
        row = lambda rep, v: {"repetition": rep, "iops": v, "mib_s": v, "cpu_s_per_million": None, "lat_us": 1}
        return {"runs": {"nbdsched-none unix write 1m qd8 x1": [row(i + 1, v) for i, v in enumerate(ours)],
                         "nbdkit unix write 1m qd8 x1": [row(i + 1, v) for i, v in enumerate(kit)],
                         "nbdkit-t1 unix write 1m qd8 x1": [row(i + 1, v / 2) for i, v in enumerate(kit)]}}

    def verdict(*reports):
        samples = targets_pooled.pooled_samples(list(reports))
        table, counts = exp6_report.targets_interval_table(samples, [wr])
        return table, counts

    table, counts = verdict(report([130] * 7, [100] * 7), report([125] * 7, [100] * 7))
    check(counts == {"met": 1, "missed": 0, "undecided": 0} and "1.27x [1.25, 1.30] of 14: met" in table,
          f"pooled: 1.25-1.30x in every repetition of both runs: met ({table})")
    table, counts = verdict(report([110] * 7, [100] * 7))
    check(counts["missed"] == 1 and "missed" in table, f"pooled: 1.10x throughout: missed ({table})")
    # The same ratios, but the second run's nbdkit twice as fast: paired within its run 0.6x, not 1.2x.
    table, counts = verdict(report([120] * 7, [100] * 7), report([120] * 7, [200] * 7))
    check(counts["undecided"] == 1 and "[0.60, 1.20] of 14" in table,
          f"pooled: a run's repetition pairs within that run only ({table})")
    table, counts = verdict(report([100, 110, 120, 125, 130, 140, 150], [100] * 7))
    check(counts["undecided"] == 1 and "1.25x [1.00, 1.50] of 7: undecided" in table,
          f"pooled: 1.00-1.50x over a 1.2x goal: undecided ({table})")
    check("| - |" in table, "pooled: TCP unmeasured: -")


def test_sched_cost_intervals():
    # 4k randwrite qd64 over Unix, 7 repetitions: none at 100k IOPS; cfq 1-3% slower in each (within 5%),
    # bfq 7-9% slower (beyond), and over TCP bfq 2-8% slower (undecided). The CPU cell: bfq adds 10% CPU.
    w = ("randwrite", "4k", 64, 1)
    r64 = ("randread", "4k", 64, 1)
    reps = lambda vals, cpu=5.0: {r: (v, 0, cpu, 0) for r, v in enumerate(vals)}
    samples = {("nbdsched-none", "unix", w): reps([100000] * 7),
               ("nbdsched-cfq", "unix", w): reps([99000, 98000, 97000, 99000, 98000, 97000, 98000]),
               ("nbdsched-bfq", "unix", w): reps([93000, 92000, 91000, 93000, 92000, 91000, 92000]),
               ("nbdsched-none", "tcp", w): reps([100000] * 7),
               ("nbdsched-bfq", "tcp", w): reps([98000, 92000, 95000, 96000, 94000, 97000, 93000]),
               ("nbdsched-none", "unix", r64): reps([1] * 7, 5.0),
               ("nbdsched-bfq", "unix", r64): reps([1] * 7, 5.5)}
    table, counts = exp6_report.sched_cost_interval_table(samples, [w, r64])
    row = next(line for line in table.splitlines() if line.startswith("| 3: 4k randwrite"))
    check("| +2.0% [+1.0%, +3.0%]: within | +8.0% [+7.0%, +9.0%]: beyond |" in row
          and row.endswith("| - | +5.0% [+2.0%, +8.0%]: undecided |"),
          f"target 4 intervals: lost throughput within, beyond, undecided; TCP cfq unmeasured ({row})")
    cpu = next(line for line in table.splitlines() if line.startswith("| 3: server CPU"))
    check("+10.0% [+10.0%, +10.0%]: beyond" in cpu, f"target 4 intervals: added CPU on the CPU cell ({cpu})")
    check(counts == {"within": 1, "beyond": 2, "undecided": 1}, f"target 4 intervals: counted ({counts})")


def test_client_cpu():
    side = {"iops": 0.0, "bw": 0, "total_ios": 0, "lat_ns": {"mean": 0, "stddev": 0}}
    job = lambda name, usr, sys_: {"jobname": name, "read": side, "write": side, "usr_cpu": usr, "sys_cpu": sys_,
                                   "job_runtime": 2000}
    r = fio.Result(["fio"], {"jobs": [job("a", 30.0, 60.0), job("b", 10.0, 10.0)]}, 5.0, [])
    cpu = r.client_cpu(r.job("a"))
    check(abs(cpu - 1.8) < 1e-9, f"fio's CPU: 90% of a 2 s job is 1.8 s, the other job's not counted (got {cpu})")
    # 100k IOPS at 9 s of fio's CPU per million requests: 0.90 of a core; a run recorded before the field: "-".
    w = ("randwrite", "4k", 64, 1)
    med = {("nbdsched-none", "unix", w): (100000.0, 390.0, 8.0, 600.0, 9.0),
           ("nbdkit", "unix", w): (80000.0, 312.0, 12.0, 800.0)}
    sections = exp6_report.tables(med, [w], lambda x: "randwrite 4k qd64 x1", ["nbdsched-none", "nbdkit"])
    text = next(body for title, body in sections if title.startswith("fio's own CPU") and "Unix" in title)
    check("| randwrite 4k qd64 x1 | 9.0 (0.90) | - |" in text, f"fio's CPU table: per request and busy share ({text})")

    # Seven repetitions: fio spends 12 µs per request against nbdsched at 82.5k IOPS (0.99 busy), 13.2 µs
    # against nbdkit at 68.2k (0.90), 30 µs against the slower nbdkit-t1 (not the one paired): 1.10x.
    samples = {("nbdsched-none", "unix", w): {r: (82500.0, 0, 5.0, 0, 12.0) for r in range(7)},
               ("nbdkit", "unix", w): {r: (68200.0, 0, 9.0, 0, 13.2) for r in range(7)},
               ("nbdkit-t1", "unix", w): {r: (30000.0, 0, 9.0, 0, 30.0) for r in range(7)}}
    text = exp6_report.client_table(samples, [w])
    check("| 3: 4k randwrite qd64 | unix | 0.99 | 0.90 | 12.0 | 13.2 | 1.10x [1.10, 1.10] of 7 |" in text,
          f"client table: the faster nbdkit's fio cost over nbdsched's ({text})")
    old = {k: {r: m[:4] for r, m in v.items()} for k, v in samples.items()}
    check(exp6_report.client_table(old, [w]) is None, "client table: none for runs without fio's CPU")


def test_light_client():
    """Experiment 15: nbdsched-load's numbers become the samples' tuples, a
    failed run is listed and not counted, and the report names the client."""
    import stat
    import tempfile

    class FakeServer:
        def __init__(self, cpu_step):
            self.sock, self.tcp_port, self._cpu, self._step = "/nowhere.sock", 1, 0.0, cpu_step

        def cpu(self):
            self._cpu += self._step   # read before and after a run: `step` seconds apart
            return self._cpu

    with tempfile.TemporaryDirectory() as d:
        tool = os.path.join(d, "load")
        with open(tool, "w") as f:   # 200k requests in 2 s, 0.5 s of its CPU; fails over TCP
            f.write("#!/bin/sh\ncase \"$*\" in *--tcp*) echo refused >&2; exit 1;; esac\n"
                    "echo '{\"requests\": 200000, \"bytes\": 819200000, \"errors\": 0, \"seconds\": 2.0, "
                    "\"iops\": 100000.0, \"mib_s\": 390.6, \"cpu_s\": 0.5}'\n")
        os.chmod(tool, stat.S_IRWXU)
        srv = {("nbdsched-none", "unix"): FakeServer(1.0), ("nbdkit", "tcp"): FakeServer(1.0)}
        w = ("randwrite", "4k", 64, 1)
        samples, commands, failures = peers_run.measure_light(srv, [w], 1, 2, tool, "/nowhere", "test")
    m = samples.get(("nbdsched-none", "unix", w), {}).get(0)
    check(m is not None and [round(x, 3) for x in m] == [100000.0, 390.6, 5.0, 640.0, 2.5],
          f"light client: IOPS, MiB/s, server CPU 5 s and client 2.5 s per million, qd/IOPS = 640 µs (got {m})")
    check(len(failures) == 1 and "nbdkit over tcp" in failures[0] and "refused" in failures[0]
          and ("nbdkit", "tcp", w) not in samples, f"light client: the failed run is listed, not counted ({failures})")
    check(len(commands) == 2 and "nbdsched-load --unix $TMP.sock" in commands[0] + commands[1],
          f"light client: the commands are kept ({commands})")

    samples = {("nbdsched-none", "unix", w): {r: (150000.0, 0, 3.0, 0, 1.0) for r in range(7)},
               ("nbdkit", "unix", w): {r: (50000.0, 0, 9.0, 0, 4.0) for r in range(7)}}
    text = exp6_report.client_table(samples, [w], client="nbdsched-load")
    check("| nbdsched-load busy: nbdsched |" in text and "| 3: 4k randwrite qd64 | unix | 0.15 | 0.20 |" in text,
          f"client table: named after nbdsched-load, its busy shares ({text})")
    med = {k: v[0] for k, v in samples.items()}
    sections = exp6_report.tables(med, [w], lambda x: "randwrite 4k qd64 x1", ["nbdsched-none", "nbdkit"],
                                  client="nbdsched-load")
    iops = sections[0][1]
    check("/dev/shm" not in iops and "| randwrite 4k qd64 x1 | 150,000 (3.00) | 50,000 (1.00) |" in iops,
          f"IOPS table: no /dev/shm column where fio did not measure it ({iops})")
    check(any(t.startswith("nbdsched-load's own CPU") for t, _ in sections), "client CPU table named after the client")


def main():
    test_client_cpu()
    test_light_client()
    test_exp10_rates()
    test_exp6_paired()
    test_exp11_paired()
    test_exp8_paired()
    test_exp8_cpu_arithmetic()
    test_exp7_costs()
    test_exp12_ratios()
    test_exp6_summary_row()
    test_exp6_targets()
    test_exp14_own_cost()
    test_median_interval()
    test_pooled_targets()
    test_sched_cost_intervals()
    if failures:
        print(f"{len(failures)} failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
