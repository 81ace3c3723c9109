"""Reservations and limits end to end: one `hdd`-profile device, three
exports in three groups, fio over NBD for a few seconds: a greedy reader
(iodepth 32), one with `reserve: {iops: 60}` (iodepth 4), one with
`limit: {iops: 20}` (iodepth 8). Loose bounds only (a shared host, a few
seconds); the tight ones are in virtual time (tests/unit/sim/test_qos.cpp).
In the same daemon: `ctl reserve|limit|latency-target`, their errors and the
capacity warning, `ctl stats`, the Prometheus families and a SIGHUP reload
(which keeps ctl's settings where the file does not change them);
and a limit below a reservation refused by --check-config with file:line:col.
"""
import subprocess
import sys
import urllib.request

from nbdsched_test import fio
from nbdsched_test.daemon import Daemon, nbdsched_binary
from nbdsched_test.process import free_port
from nbdsched_test.verdict import check

RUNTIME = "4"

CONFIG = """metrics: 127.0.0.1:{port}
devices:
  - {{name: d0, backend: ram, size: 768MiB, scheduler: none, profile: hdd}}
exports:
  - {{name: greedy, device: d0, size: 256MiB, group: greedy}}
  - {{name: reserved, device: d0, offset: 256MiB, size: 256MiB, group: reserved}}
  - {{name: limited, device: d0, offset: 512MiB, size: 256MiB, group: limited}}
groups:
  - {{name: greedy}}
  - {{name: reserved, reserve: {{iops: {reserve}}}}}
  - {{name: limited, limit: {{iops: 20, burst: 100ms}}}}
"""


def qos_of(d, group):
    return d.group(d.device(d.stats(), "d0"), group).get("qos")


def check_config_error(d):
    bad = d.file("bad.yaml")
    with open(bad, "w") as f:
        f.write("groups:\n  - name: g\n    reserve: {iops: 60}\n    limit: {iops: 20}\n")
    r = subprocess.run([nbdsched_binary(), "--check-config", bad], capture_output=True, text=True, timeout=30)
    out = r.stdout + r.stderr
    check(r.returncode != 0 and f"{bad}:4:12: groups[0].limit" in out and "below reserve iops 60" in out,
          f"a limit below the reservation is an error at file:line:col ({out.strip()!r})")


def main():
    fio.require_nbd_engine()
    port = free_port()
    with Daemon(CONFIG.format(port=port, reserve=60), "qos") as d:
        check("IOPS of 4KiB random reads" in d.log(), "the hdd profile's capacity is measured and logged")
        jobs = [("greedy", 32), ("reserved", 4), ("limited", 8)]
        r = fio.run({"ioengine": "nbd", "thread": True, "time_based": True, "runtime": RUNTIME, "ramp_time": 1,
                     "rw": "randread", "bs": "4k"},
                    [(n, {"uri": d.uri(n), "iodepth": qd}) for n, qd in jobs], timeout=120)
        # Over the 4 s window: fio's own iops also counts the wait for the
        # requests still queued when it ended (the limited group's 8 at 20
        # IOPS: 0.4 s), which read the limited group 7% low (18.6 for 20.0),
        # so a limiter letting 24 through passed the 23 ceiling at 22.7.
        iops = {n: r.window_iops(r.job(n), "read") for n, _ in jobs}
        fio_iops = {n: v["iops"] for n, v in r.per_job("read").items()}
        print("IOPS over the window: " + ", ".join(f"{n} {v:.1f}" for n, v in iops.items()) +
              "; fio's iops: " + ", ".join(f"{n} {v:.1f}" for n, v in fio_iops.items()))
        check(iops["reserved"] >= 60 * 0.8, f"reserved group near its floor ({iops['reserved']:.1f} >= 48)")
        check(iops["limited"] <= 20 * 1.15, f"limited group under its ceiling ({iops['limited']:.1f} <= 23)")
        check(iops["limited"] >= 20 * 0.6, f"limited group still served ({iops['limited']:.1f} >= 12)")
        check(iops["greedy"] > 0, "the greedy group keeps the rest")

        lim, res = qos_of(d, "limited"), qos_of(d, "reserved")
        check(lim is not None and res is not None, "ctl stats reports the qos of both groups")
        check(lim["stats"]["limit_delayed"] > 0 and lim["stats"]["throttled_ms"] > 500,
              f"the limit held requests back ({lim['stats']})")
        check(res["stats"]["reserved_dispatches"] > 0, f"the floor dispatched ahead of the policy ({res['stats']})")
        check(qos_of(d, "greedy") is None, "a group without settings has no qos entry")
        text = d.ctl("stats")
        check("below floor" in text and "group limited" in text, "ctl stats prints the qos table")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        for family in ("nbdsched_group_throttled_seconds_total", "nbdsched_group_limit_delayed_requests_total",
                       "nbdsched_group_below_reservation_seconds_total", "nbdsched_group_latency_target_misses_total"):
            check(f'{family}{{device="d0",group="' in metrics, f"metrics: {family}")

        # Live changes, their errors and the capacity warning.
        d.ctl("limit", "limited", "iops=40", "burst=50ms")
        q = next(g for g in d.listing()["groups"] if g["name"] == "limited")["qos"]
        check(q["limit"]["iops"] == 40 and q["limit"]["burst_ms"] == 50, f"ctl limit applies ({q})")
        err = d.ctl("limit", "reserved", "iops=10", expect=1)
        check("limit iops 10 is below reserve iops 60" in err, f"ctl limit below the floor refused ({err.strip()})")
        err = d.ctl("reserve", "nobody", "iops=1", expect=1)
        check("no group 'nobody'" in err, "ctl reserve on an unknown group refused")
        warn = subprocess.run([nbdsched_binary(), "ctl", "--socket", d.control, "reserve", "greedy", "iops=5000"],
                              capture_output=True, text=True, timeout=30)
        check(warn.returncode == 0 and "reservations add up to 5060 IOPS" in warn.stderr and "above the" in warn.stderr,
              f"a reservation sum above capacity is accepted with a warning ({warn.stderr.strip()})")
        d.ctl("reserve", "greedy", "off")
        d.ctl("latency-target", "greedy", "50ms")
        q = qos_of(d, "greedy")
        check(q is not None and q["latency_target_ms"] == 50 and q["reserve"]["iops"] == 0,
              "ctl reserve off and ctl latency-target apply")

        # SIGHUP: the file's settings replace what ctl set where the file
        # changes them; elsewhere ctl's stay (tests/control/test_reload_qos.py).
        d.write_config(CONFIG.format(port=port, reserve=30))
        d.hup()
        check(d.wait_log("reload: done"), "reload applied")
        check(qos_of(d, "reserved")["reserve"]["iops"] == 30, "reload changes the reservation")
        check(qos_of(d, "limited")["limit"]["iops"] == 40, "reload keeps the limit set with ctl (the file's is unchanged)")
        check_config_error(d)
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
