"""`ctl reserve|limit|latency-target` across planned restarts (--takeover),
twice: a group's QoS set with ctl is kept where the new process's file
gives that group the reserve, limit and latency_target the old one's did,
and the new file's three apply where it changed any -- the rule a SIGHUP
follows (test_reload_qos.py) and ctl weights follow across a restart
(test_takeover_ctl_changes.py). Before, every ctl QoS change was dropped by
a restart without a word.

Old file: ga limit iops=500, gb and gc nothing. ctl: `reserve ga iops=50`,
`limit gb iops=2`, `latency-target gc 20ms`, `weight gc 300`. The new file
changes ga's limit to 400. Checked on the second process and on a third
(the second's own hand-over): ga has the file's settings (no reservation),
gb keeps iops=2 and it holds on the device (6 reads take 1.5 s at least),
gc keeps 20ms and weight 300, and the log says which were kept."""
import json
import os
import time

import nbd

from nbdsched_test.handover import Generations, ctl_at
from nbdsched_test.process import wait_for
from nbdsched_test.verdict import Checks

CONFIG = """
listen: [{{unix: {dir}/nbd.sock}}]
control: {dir}/ctl.sock
groups: [{{name: ga, limit: {{iops: {ga_limit}}}}}, {{name: gb}}, {{name: gc}}]
devices: [{{name: d0, backend: file, path: {dir}/d0.img, size: 16MiB, scheduler: cfq}}]
exports: [{{name: a, device: d0, group: ga}}, {{name: b, device: d0, group: gb}}]
"""


def ctl(tmp, *args):
    return ctl_at(tmp.file("ctl.sock"), *args)


def groups(tmp):
    return {g["name"]: g for g in json.loads(ctl(tmp, "list", "--json"))["groups"]}


def qos(g):
    return g.get("qos", {})


def six_reads_seconds(sock):
    h = nbd.NBD()
    h.connect_uri(f"nbd+unix:///b?socket={sock}")
    start = time.monotonic()
    for _ in range(6):
        h.pread(4096, 0)
    took = time.monotonic() - start
    h.shutdown()
    return took


def check_carried(checks, tmp, tag, sock):
    g = groups(tmp)
    ga, gb, gc = qos(g["ga"]), qos(g["gb"]), qos(g["gc"])
    checks.check(f"{tag}: ga has the new file's limit 400 and no reservation (the file changed ga's)",
                 ga.get("limit", {}).get("iops") == 400 and ga.get("reserve", {}).get("iops", 0) == 0, str(ga))
    checks.check(f"{tag}: gb keeps ctl's limit iops=2", gb.get("limit", {}).get("iops") == 2, str(gb))
    checks.check(f"{tag}: gc keeps ctl's latency target 20ms", gc.get("latency_target_ms") == 20, str(gc))
    checks.check(f"{tag}: gc keeps ctl's weight 300", g["gc"]["weight"] == 300, str(g["gc"]))
    took = six_reads_seconds(sock)
    checks.check(f"{tag}: gb's limit holds on the device: 6 reads take 1.5 s at least", took >= 1.5, f"{took:.2f} s")


def main():
    checks = Checks()
    with Generations("takeover-ctl-qos") as g:
        tmp = g.tmp
        with open(tmp.file("d0.img"), "wb") as f:   # a file: RAM would not be handed over (its data is lost)
            f.truncate(16 << 20)
        sock, handover = tmp.file("nbd.sock"), tmp.file("handover.sock")
        old = g.start("old", CONFIG.format(dir=tmp.path, ga_limit=500), ["--handover-socket", handover])
        checks.check("old daemon up", wait_for(lambda: os.path.exists(handover) and os.path.exists(sock), 10))
        for args in (["reserve", "ga", "iops=50"], ["limit", "gb", "iops=2"], ["latency-target", "gc", "20ms"],
                     ["weight", "gc", "300"]):
            ctl(tmp, *args)

        changed = CONFIG.format(dir=tmp.path, ga_limit=400)
        mid = g.take_over(checks, "mid", changed, handover, old, "second")
        check_carried(checks, tmp, "second", sock)
        mid_log = g.log("mid")
        checks.check("the second daemon logs what it kept and what its file overrides",
                     "ctl QoS of group gb reserve none, limit iops 2 (burst 100ms), latency target none kept" in mid_log
                     and "ctl QoS of group gc reserve none, limit none, latency target 20ms kept" in mid_log
                     and "ctl QoS of group ga reserve iops 50, limit iops 500 (burst 100ms), latency target none not "
                     "kept: this configuration changes" in mid_log, mid_log[-2000:])

        g.take_over(checks, "new", changed, handover, mid, "third")
        check_carried(checks, tmp, "third", sock)
        checks.check("the third daemon logs gb's and gc's ctl QoS as carried on again",
                     g.log("new").count("ctl QoS of group g") == 2 and " kept" in g.log("new"))
        g.print_logs_if_failed(checks, "mid", "new")
    checks.finish()


if __name__ == "__main__":
    main()
