"""A reload keeps what `ctl reserve|limit|latency-target` set on a group
unless the file changes that group's reserve, limit or latency_target, as
it keeps a ctl weight (docs/restart.md), and says so in its reply and log.
Before, every reload put the file's settings back without a word: a limit
set with ctl on a noisy tenant vanished on a reload that changed another
group's weight.

ctl: `limit gc bps=512KiB`, `reserve ga iops=50`, `latency-target gb 20ms`.
Reload 1 changes only gb's weight: all three are kept (gb's weight is the
file's). Reload 2 changes ga's limit: ga gets the file's settings (its ctl
reservation is gone, the reply says so); gc and gb keep theirs. Reload 3
sets ga's limit to iops=2 in the file: it holds on the device (before, a
reload changed the group table only)."""
import sys
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

KiB = 1024

CONFIG = """devices:
  - {{name: d0, backend: ram, size: 16MiB, scheduler: cfq}}
exports:
  - {{name: a, device: d0, group: ga}}
groups:
  - {{name: ga, limit: {{iops: {ga_limit}}}}}
  - {{name: gb, weight: {gb_weight}}}
  - {{name: gc}}
"""


NO_QOS = {"reserve": {"iops": 0, "bps": 0}, "limit": {"iops": 0, "bps": 0, "burst_ms": 100.0},
          "latency_target_ms": 0.0}


def groups(d):
    """name -> the group's listing, with "qos" filled in where it has none."""
    return {g["name"]: {"qos": NO_QOS, **g} for g in d.listing()["groups"]}


def main():
    checks = Checks()
    with Daemon(CONFIG.format(ga_limit=500, gb_weight=100), "reload_qos") as d:
        d.ctl("limit", "gc", "bps=512KiB")
        d.ctl("reserve", "ga", "iops=50")
        d.ctl("latency-target", "gb", "20ms")

        d.write_config(CONFIG.format(ga_limit=500, gb_weight=200))
        out = d.ctl("reload")
        g = groups(d)
        checks.check("reload 1: gb's weight is the file's", g["gb"]["weight"] == 200, str(g["gb"]))
        checks.check("reload 1: gc keeps its ctl limit", g["gc"]["qos"]["limit"]["bps"] == 512 * KiB,
                     str(g["gc"]["qos"]))
        checks.check("reload 1: ga keeps its ctl reservation beside the file's limit",
                     g["ga"]["qos"]["reserve"]["iops"] == 50 and g["ga"]["qos"]["limit"]["iops"] == 500,
                     str(g["ga"]["qos"]))
        checks.check("reload 1: gb keeps its ctl latency target (the file changed its weight only)",
                     g["gb"]["qos"]["latency_target_ms"] == 20, str(g["gb"]["qos"]))
        checks.check("reload 1: the reply names what it kept",
                     "group gc: reserve none, limit bps 512KiB (burst 100ms), latency target none, set with ctl, "
                     "kept" in out and "group ga:" in out and "group gb: reserve none" in out, out.strip())
        checks.check("reload 1: the log says so", d.wait_log("reload: group gc: reserve none, limit bps 512KiB"))

        d.write_config(CONFIG.format(ga_limit=400, gb_weight=200))
        out = d.ctl("reload")
        g = groups(d)
        checks.check("reload 2: ga has the file's settings, its ctl reservation gone",
                     g["ga"]["qos"]["reserve"]["iops"] == 0 and g["ga"]["qos"]["limit"]["iops"] == 400,
                     str(g["ga"]["qos"]))
        checks.check("reload 2: the reply says ga's ctl settings were not kept",
                     "group ga: reserve iops 50, limit iops 500 (burst 100ms), latency target none, set with ctl, "
                     "not kept: the file changes the group's to reserve none, limit iops 400" in out, out.strip())
        checks.check("reload 2: gc and gb keep theirs",
                     g["gc"]["qos"]["limit"]["bps"] == 512 * KiB and g["gb"]["qos"]["latency_target_ms"] == 20,
                     f"{g['gc']['qos']} {g['gb']['qos']}")

        # ga's settings are the file's again: a third reload that changes nothing leaves them and says nothing of ga.
        out = d.ctl("reload")
        checks.check("reload 3: ga no longer counts as changed with ctl", "group ga" not in out, out.strip())
        # A file's new limit reaches the devices, not only the group table
        # (before, 6 reads under a reloaded iops=2 took 0.0 s).
        d.write_config(CONFIG.format(ga_limit=2, gb_weight=200))
        d.ctl("reload")
        h = nbd.NBD()
        h.connect_uri(d.uri("a"))
        start = time.monotonic()
        for _ in range(6):
            h.pread(4096, 0)
        took = time.monotonic() - start
        h.shutdown()
        checks.check("a reloaded limit iops=2 holds: 6 reads take 1.5 s at least", took >= 1.5, f"{took:.2f} s")
        if checks.failed:
            d.print_log_tail()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
