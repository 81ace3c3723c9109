"""Seed 003, two tenants on one disk: two fio jobs (--ioengine=nbd), each on
its own export of one `ssd`-profile device, in groups weighted 1000 and 100;
one sequential 32 KiB writer each, plain NBD writes under the device's
default (writes are sync unless `writes_sync: false`), so this proves that
writes are weighted by default. With group_idle on, cfq and bfq give the
heavy group more bandwidth; with cfq group_idle 0 the queueing SSD serves
both about equally. Only directions and generous
bounds are asserted; bench/exp3_seed003_groups_ssd.py measures the ratios.
`ctl stats` must agree with fio about who got more.
"""
import os
import sys

from nbdsched_test import fio
from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import check

RUNTIME = os.environ.get("NBDSCHED_SHARES_RUNTIME", "4")
# (device, scheduler, group_idle); argv[1] picks the scheduler (default: both)
ALL_CASES = [("cfq8", "cfq", "8ms"), ("bfq8", "bfq", "8ms"), ("cfq0", "cfq", "0")]
ONLY = sys.argv[1] if len(sys.argv) > 1 else None
CASES = [c for c in ALL_CASES if ONLY in (None, c[1])]


def config():
    devs, exps = [], []
    for i, (name, sched, gi) in enumerate(CASES):
        devs.append(f"  - {{name: {name}, backend: ram, size: 256MiB, scheduler: {sched}, profile: ssd, "
                    f"tunables: {{slice_idle: 0, group_idle: {gi}}}}}")
        exps.append(f"  - {{name: heavy-{name}, device: {name}, size: 128MiB, group: heavy}}")
        exps.append(f"  - {{name: light-{name}, device: {name}, offset: 128MiB, group: light}}")
    return ("devices:\n" + "\n".join(devs) + "\nexports:\n" + "\n".join(exps) +
            "\ngroups:\n  - {name: heavy, weight: 1000}\n  - {name: light, weight: 100}\n")


def writers(d, dev):
    """(heavy, light) MiB/s of one sequential writer per group."""
    r = fio.run({"ioengine": "nbd", "thread": True, "time_based": True, "runtime": RUNTIME,
                 "ramp_time": 0.5, "rw": "write", "bs": "32k", "iodepth": 1},
                [(g, {"uri": d.uri(f"{g}-{dev}")}) for g in ("heavy", "light")], timeout=120)
    bw = r.per_job("write")
    return bw["heavy"]["bw_mib"], bw["light"]["bw_mib"]


def group_bytes(d, dev):
    """(heavy, light) write_bytes so far, from ctl stats."""
    ds = d.device(d.stats(), dev)
    return tuple(d.group(ds, g)["counters"]["write_bytes"] for g in ("heavy", "light"))


def main():
    fio.require_nbd_engine()
    with Daemon(config(), "shares") as d:
        results = {}
        for dev, sched, gi in CASES:
            # A fio thread descheduled for longer than group_idle loses its
            # group's turn, and a shared 2-core host does that in bursts
            # (0.8:1 seen once in CI, 1.6-4:1 right after). A scheduler that
            # ignores weights gives about 1:1 every time, so with idling on
            # up to 3 attempts are allowed; each is printed.
            for attempt in range(1, 4 if gi != "0" else 2):
                before = group_bytes(d, dev)
                h, l_ = writers(d, dev)
                after = group_bytes(d, dev)
                ratio = h / l_ if l_ > 0 else float("inf")
                if gi == "0" or ratio > 1.3:
                    break
                print(f"{sched} group_idle {gi}: attempt {attempt} gave {ratio:.2f}:1 (heavy {h:.1f}, light "
                      f"{l_:.1f} MiB/s); a noisy host? measuring again")
            results[dev] = ratio
            gh, gl = (a - b for a, b in zip(after, before))   # this attempt's bytes
            print(f"{sched} group_idle {gi}: heavy {h:.1f} MiB/s, light {l_:.1f} MiB/s, share {ratio:.2f}:1; "
                  f"ctl stats write_bytes heavy {gh} light {gl}")
            if gi != "0":
                check(ratio > 1.3, f"{sched} group_idle {gi}: heavy gets more ({ratio:.2f}:1 > 1.3:1)")
                check(gh > gl, f"{sched}: ctl stats agrees (heavy wrote more)")
            else:
                check(0.25 < ratio < 4.0, f"{sched} group_idle 0: no big share ({ratio:.2f}:1 within 0.25..4; a loaded host is noisy)")
        if "cfq0" in results:
            check(results["cfq8"] > results["cfq0"], "cfq: group_idle on shifts the share towards the heavy group")
    return 0


if __name__ == "__main__":
    sys.exit(main())
