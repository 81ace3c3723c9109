"""Experiment 13, reservations and limits: three groups on one `hdd`-profile
device, 4 KiB random reads: `greedy` (iodepth 32), `reserved` (iodepth 4,
`reserve: {iops: 60}`), `limited` (iodepth 8, `limit: {iops: 20}`), each on
its own export, under `none`, `cfq` and `bfq`, first without QoS settings,
then with them (set live by `nbdsched ctl reserve|limit`). Beside it,
nbdkit's rate filter on the limited job's shape: it caps bytes per second
only (in bits: 655360 bit/s = 80 KiB/s = 20 IOPS of 4 KiB), per connection, over a RAM disk with no
timing (it has no reservations, no latency targets, no weights). Plots
per-group IOPS over time (fio's IOPS log, 500 ms averages)."""

import glob
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
    g = common.fio_base(runtime, ramp)
    g.update({"rw": "randread", "bs": "4k", "log_avg_msec": 500})
    jobs = []
    for name, qd in JOBS:
        prefix = os.path.join(tmp, f"{label}-{name}")
        jobs.append((name, {"uri": srv.uri(f"{name}{i}"), "iodepth": qd, "write_iops_log": prefix}))
    r = fio.run(g, jobs, [srv])
    series = {name: iops_series(os.path.join(tmp, f"{label}-{name}")) for name, _ in JOBS}
    return r, series


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
    devices, exports = [], []
    for i, policy in enumerate(POLICIES):
        devices.append(common.ram_device(f"dev{i}", "768MiB", policy, None, "hdd"))
        for k, (name, _) in enumerate(JOBS):
            exports.append({"name": f"{name}{i}", "device": f"dev{i}", "offset": f"{256 * k}MiB", "size": "256MiB",
                            "group": name})
    groups = [{"name": name} for name, _ in JOBS]
    out, series, results = {}, {}, []
    with TempDir("e13") as tmp, servers.start_nbdsched(tmp, "d", devices, exports, groups, control=True) as srv:
        for qos in (False, True):
            if qos:
                ctl(srv, "reserve", "reserved", f"iops={RESERVE}")
                ctl(srv, "limit", "limited", f"iops={LIMIT}")
            for i, policy in enumerate(POLICIES):
                r, s = run_policy(srv, tmp, i, f"{policy}-{int(qos)}", runtime, ramp)
                results.append(r)
                out[(policy, qos)] = {n: v["iops"] for n, v in r.per_job("read").items()}
                series[(policy, qos)] = s
        commands = common.commands_for(srv, results)
        commands = [f"nbdsched ctl --socket CTL reserve reserved iops={RESERVE}",
                    f"nbdsched ctl --socket CTL limit limited iops={LIMIT}"] + commands
        rate_iops, rate_cmd = nbdkit_rate(tmp, runtime, ramp)
        commands.append(f"nbdkit -U SOCK --filter=rate memory 256M connection-rate={LIMIT * 4096 * 8}")
        commands.append(rate_cmd.replace(tmp, "TMP"))
    rows, status = [], []
    for policy in POLICIES:
        for qos in (False, True):
            o = out[(policy, qos)]
            total = sum(o.values())
            rows.append((policy, "reserve 60 + limit 20" if qos else "plain", report.f1(o["greedy"]),
                         report.f1(o["reserved"]), report.f1(o["limited"]), report.f1(total)))
        o = out[(policy, True)]
        ok = o["reserved"] >= RESERVE * 0.95 and abs(o["limited"] - LIMIT) <= LIMIT * 0.02
        status.append(f"{policy}: {'met' if ok else 'missed'} (reserved {o['reserved']:.1f}, "
                      f"limited {o['limited']:.1f})")
    rows.append(("nbdkit rate filter", f"connection-rate {LIMIT * 4096 * 8} bit/s (RAM, no timing)", "-", "-",
                 report.f1(rate_iops), "-"))
    text = report.table(["policy", "settings", "greedy IOPS", "reserved IOPS", "limited IOPS", "total IOPS"], rows)
    text += (f"\n\nOne run each of {runtime} s after {ramp} s ramp, fio's IOPS per job (= export = group). "
             "Targets (virtual time, tests/unit/sim/test_qos.cpp asserts them): the reservation met within 5%, "
             "the limit within 2%, device >= 95% busy. End to end, fio's own ramp and the wall clock add noise.")
    verdict = "Target met when reserved >= 57 and limited within 19.6..20.4 IOPS: " + "; ".join(status) + "."
    plot(report.plot_path(NAME, a.quick), series, runtime)
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("hdd"))]
    print(report.write(NAME, "Experiment 13: reservations and limits per group", sections, facts, commands,
                       peers=True, quick=a.quick, summary={
                           "setup": "hdd, 4k randread: greedy qd32, reserved 60 IOPS qd4, limited 20 IOPS qd8",
                           "seed": "-",
                           "ours": "; ".join(status),
                           "target": "reservation within 5%, limit within 2%",
                           "status": ", ".join(s.split(" (")[0] for s in status)}))
    return out


if __name__ == "__main__":
    main()
