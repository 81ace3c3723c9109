"""Experiment 13, reservations and limits: three groups on one `hdd`-profile
device, 4 KiB random reads: `greedy` (iodepth 32), `reserved` (iodepth 4,
`reserve: {iops: 60}`), `limited` (iodepth 8, `limit: {iops: 20}`), each on
its own export, under `none`, `cfq` and `bfq`, first without QoS settings,
then with them (set live by `nbdsched ctl reserve|limit`). Beside it,
nbdkit's rate filter on the limited job's shape: it caps bytes per second
only (in bits: 655360 bit/s = 80 KiB/s = 20 IOPS of 4 KiB), per connection, over a RAM disk with no
timing (it has no reservations, no latency targets, no weights). Plots
per-group IOPS over time (fio's IOPS log, 500 ms averages). Then the
latency target: a qd1 random reader (`latency-target reader 50ms`) against
a qd32 random writer, per policy, without and with the target: the share
of 1 s windows whose reader p90 met 50 ms, and the total kept.
IOPS are counted by the daemon over one window (bench/lib/common.py
server_window), not by fio."""

import glob
import math
import os
import subprocess
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.daemon import nbdsched_binary  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp13-qos"
POLICIES = ["none", "cfq", "bfq"]
JOBS = [("greedy", 32), ("reserved", 4), ("limited", 8)]
RESERVE, LIMIT = 60, 20
TARGET_MS = 50
LAT_JOBS = [("reader", 1, "randread"), ("writer", 32, "randwrite")]


def iops_series(prefix):
    """[(seconds, iops)] from fio's IOPS log of one job."""
    out = []
    for path in sorted(glob.glob(prefix + "_iops.*.log")):
        with open(path) as f:
            for line in f:
                parts = [p.strip() for p in line.split(",")]
                if len(parts) >= 2:
                    out.append((int(parts[0]) / 1000.0, float(parts[1])))
    return out


def run_policy(srv, tmp, i, label, runtime, ramp):
    """{group: IOPS} counted by the daemon, fio's Result, the IOPS series."""
    g = common.fio_base(runtime, ramp)
    g.update({"rw": "randread", "bs": "4k", "log_avg_msec": 500})
    jobs = []
    for name, qd in JOBS:
        prefix = os.path.join(tmp, f"{label}-{name}")
        jobs.append((name, {"uri": srv.uri(f"{name}{i}"), "iodepth": qd, "write_iops_log": prefix}))
    rate, r = common.server_window(srv, g, jobs, runtime, ramp, requests=True)
    series = {name: iops_series(os.path.join(tmp, f"{label}-{name}")) for name, _ in JOBS}
    return {name: rate[f"{name}{i}"] for name, _ in JOBS}, r, series


def p90(values):
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(len(s) * 0.9) - 1)]


def latency_run(srv, tmp, i, label, runtime, ramp):
    """The reader's p90 per 1 s window of the measured time (fio's
    per-request latency log), and the total IOPS counted by the daemon."""
    g = common.fio_base(runtime, ramp)
    g["bs"] = "4k"
    prefix = os.path.join(tmp, f"{label}-reader")
    jobs = [(name, {"uri": srv.uri(f"{name}{i}"), "iodepth": qd, "rw": rw}) for name, qd, rw in LAT_JOBS]
    jobs[0][1]["write_lat_log"] = prefix
    rate, r = common.server_window(srv, g, jobs, runtime, ramp, requests=True)
    windows = {}
    for path in glob.glob(prefix + "_lat.*.log"):
        with open(path) as f:
            for line in f:
                parts = [p.strip() for p in line.split(",")]
                t = int(parts[0]) / 1000.0 - ramp
                if 0 <= t < int(runtime):
                    windows.setdefault(int(t), []).append(int(parts[1]) / 1e6)
    p90s = [p90(windows.get(w, [float("inf")])) for w in range(int(runtime))]
    return p90s, sum(rate[f"{name}{i}"] for name, _, _ in LAT_JOBS), rate[f"reader{i}"], r


def ctl(srv, *args):
    return subprocess.run([nbdsched_binary(), "ctl", "--socket", srv.control, *args], check=True,
                          capture_output=True, text=True, timeout=30).stdout


def nbdkit_rate(tmp, runtime, ramp):
    """The limited job alone against nbdkit memory + rate filter (bytes/s only)."""
    sock = os.path.join(tmp, "rate.sock")
    p = subprocess.Popen(["nbdkit", "-f", "--exit-with-parent", "-U", sock, "--filter=rate", "memory", "256M",
                          f"connection-rate={LIMIT * 4096 * 8}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            subprocess.run(["sleep", "0.05"])
        g = common.fio_base(runtime, ramp)
        g.update({"rw": "randread", "bs": "4k", "iodepth": 8})
        r = fio.run(g, [("limited", {"uri": f"nbd+unix:///?socket={sock}"})])
        return r.per_job("read")["limited"]["iops"], r.command
    finally:
        p.terminate()
        p.wait(timeout=10)


def plot(path, series, runtime):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, len(POLICIES), figsize=(4 * len(POLICIES), 6), sharey=True)
    for (policy, qos), s in series.items():
        ax = axes[1 if qos else 0][POLICIES.index(policy)]
        for name, _ in JOBS:
            pts = s[name]
            ax.plot([t for t, _ in pts], [v for _, v in pts], label=name)
        ax.axhline(RESERVE, color="grey", ls="--", lw=0.8)
        ax.axhline(LIMIT, color="grey", ls=":", lw=0.8)
        ax.set_title(f"{policy} {'with reserve/limit' if qos else 'plain'}", fontsize=9)
        ax.set_xlabel("s")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("IOPS")
    axes[1][0].set_ylabel("IOPS")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"hdd, 4k random reads: per-group IOPS over time (reserve {RESERVE}, limit {LIMIT})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    a = common.args(__doc__)
    runtime, ramp = (1.5, 0.5) if a.quick else (20, 2)
    facts = report.Facts()
    lat_runtime, lat_ramp = (1.5, 0.5) if a.quick else (10, 1)
    lat_policies = POLICIES[-1:] if a.quick else POLICIES   # the smoke run checks the script, not cfq
    devices, exports = [], []
    for i, policy in enumerate(POLICIES):
        devices.append(common.ram_device(f"dev{i}", "768MiB", policy, None, "hdd"))
        for k, (name, _) in enumerate(JOBS):
            exports.append({"name": f"{name}{i}", "device": f"dev{i}", "offset": f"{256 * k}MiB", "size": "256MiB",
                            "group": name})
        # The latency-target workload: its own device per policy.
        devices.append(common.ram_device(f"lat{i}", "512MiB", policy, None, "hdd"))
        for k, (name, _, _) in enumerate(LAT_JOBS):
            exports.append({"name": f"{name}{i}", "device": f"lat{i}", "offset": f"{256 * k}MiB", "size": "256MiB",
                            "group": name})
    groups = [{"name": name} for name, _ in JOBS] + [{"name": name} for name, _, _ in LAT_JOBS]
    out, series, results, fio_iops, lat = {}, {}, [], {}, {}
    with TempDir("e13") as tmp, servers.start_nbdsched(tmp, "d", devices, exports, groups, control=True) as srv:
        for qos in (False, True):
            if qos:
                ctl(srv, "reserve", "reserved", f"iops={RESERVE}")
                ctl(srv, "limit", "limited", f"iops={LIMIT}")
            for i, policy in enumerate(POLICIES):
                o, r, s = run_policy(srv, tmp, i, f"{policy}-{int(qos)}", runtime, ramp)
                results.append(r)
                out[(policy, qos)] = o
                fio_iops[(policy, qos)] = {n: v["iops"] for n, v in r.per_job("read").items()}
                series[(policy, qos)] = s
        for target in (False, True):
            if target:
                ctl(srv, "latency-target", "reader", f"{TARGET_MS}ms")
            for policy in lat_policies:
                i = POLICIES.index(policy)
                p90s, total, reader, r = latency_run(srv, tmp, i, f"lat-{policy}-{int(target)}", lat_runtime,
                                                     lat_ramp)
                results.append(r)
                lat[(policy, target)] = (p90s, total, reader)
        commands = common.commands_for(srv, results)
        commands = [f"nbdsched ctl --socket CTL reserve reserved iops={RESERVE}",
                    f"nbdsched ctl --socket CTL limit limited iops={LIMIT}",
                    f"nbdsched ctl --socket CTL latency-target reader {TARGET_MS}ms"] + commands
        rate_iops, rate_cmd = nbdkit_rate(tmp, runtime, ramp)
        commands.append(f"nbdkit -U SOCK --filter=rate memory 256M connection-rate={LIMIT * 4096 * 8}")
        commands.append(rate_cmd.replace(tmp, "TMP"))
    rows, status = [], []
    for policy in POLICIES:
        plain_total = sum(out[(policy, False)].values())
        for qos in (False, True):
            o = out[(policy, qos)]
            total = sum(o.values())
            rows.append((policy, "reserve 60 + limit 20" if qos else "plain", report.f1(o["greedy"]),
                         report.f1(o["reserved"]), report.f1(o["limited"]), report.f1(total),
                         f"{100 * total / plain_total:.0f}%", report.f1(fio_iops[(policy, qos)]["limited"])))
        o = out[(policy, True)]
        kept = sum(o.values()) / plain_total
        ok = o["reserved"] >= RESERVE * 0.95 and abs(o["limited"] - LIMIT) <= LIMIT * 0.02 and kept >= 0.95
        status.append(f"{policy}: {'met' if ok else 'missed'} (reserved {o['reserved']:.1f}, "
                      f"limited {o['limited']:.2f}, total {100 * kept:.0f}% of plain)")
    rows.append(("nbdkit rate filter", f"connection-rate {LIMIT * 4096 * 8} bit/s (RAM, no timing)", "-", "-",
                 "-", "-", "-", report.f1(rate_iops)))
    text = report.table(["policy", "settings", "greedy IOPS", "reserved IOPS", "limited IOPS", "total IOPS",
                         "total vs plain", "limited, fio's count"], rows)
    text += (f"\n\nOne run each; IOPS per export (= fio job = group) counted by the daemon over the same {runtime} s "
             f"window, {ramp} s after fio started (bench/lib/common.py server_window). fio's own count of the "
             "limited job is beside it: fio's runtime includes the wait for its last requests after the end "
             "(up to 8 queued behind the limit, 0.4 s) but not their completions, so it reads low. "
             "Targets (virtual time, tests/unit/sim/test_qos.cpp asserts them): the reservation met within 5%, "
             "the limit within 2%, device >= 95% busy (here: the total at least 95% of the plain run's, "
             "whose device is busy all the time with a qd32 job on it).")
    lat_rows, lat_status = [], []
    for policy in lat_policies:
        for target in (False, True):
            p90s, total, reader = lat[(policy, target)]
            met = sum(1 for p in p90s if p <= TARGET_MS) / max(1, len(p90s))
            kept = total / lat[(policy, False)][1]
            lat_rows.append((policy, f"target {TARGET_MS} ms" if target else "plain", f"{100 * met:.0f}%",
                             f"{max(p90s):.0f}", report.f1(reader), report.f1(total), f"{100 * kept:.0f}%"))
            if target:
                ok = met >= 0.99 and kept >= 0.80
                lat_status.append(f"{policy} latency: {'met' if ok else 'missed'} ({100 * met:.0f}% of windows, "
                                  f"total {100 * kept:.0f}%)")
    text += "\n\n" + report.table(["policy", "reader", "1 s windows p90 <= 50 ms", "worst p90 ms",
                                     "reader IOPS", "total IOPS", "total kept"], lat_rows)
    text += (f"\n\nA qd1 4k random reader against a qd32 4k random writer on `hdd`, one run each of "
             f"{lat_runtime} s after {lat_ramp} s (the reader's p90 per 1 s window from fio's per-request "
             "latency log; IOPS counted by the daemon). Target: at least 99% of windows met, total at least "
             "80% of the plain run.")
    verdict = ("Target met when reserved >= 57, limited within 19.6..20.4 IOPS and the total >= 95% of plain: "
               + "; ".join(status) + ". Latency target: " + "; ".join(lat_status) + ".")
    plot(report.plot_path(NAME, a.quick), series, runtime)
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("hdd"))]
    print(report.write(NAME, "Experiment 13: reservations and limits per group", sections, facts, commands,
                       peers=True, quick=a.quick, summary={
                           "setup": "hdd, 4k randread: greedy qd32, reserved 60 IOPS qd4, limited 20 IOPS qd8; "
                                    "qd1 reader with a 50 ms target against a qd32 writer",
                           "seed": "-",
                           "ours": "; ".join(status + lat_status),
                           "target": "reservation within 5%, limit within 2%, total >= 95%; p90 50 ms in 99% of 1 s",
                           "status": ", ".join(s.split(" (")[0] for s in status + lat_status)}))
    return out


if __name__ == "__main__":
    main()
