"""A reload keeps a weight set with `ctl weight` unless the file changes
that group's weight, also when the file changes the group's reserve, limit
or latency_target (the rule for ctl's QoS settings, test_reload_qos.py),
and its reply and log say so. Before, a reload that changed only a group's
QoS put the file's weight back over ctl's without a word.

ctl: `weight ga 500`, `weight gb 700`. Reload 1 changes only ga's limit:
ga keeps 500, gb keeps 700 (untouched), and the reply names ga's weight as
kept without saying the file's 100. Reload 2 changes ga's weight to 300:
the file's holds and the reply says ctl's 500 is not kept. Reload 3 changes
ga's limit again: 300 stays (ctl's change was forgotten)."""
import sys

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

CONFIG = """devices:
  - {{name: d0, backend: ram, size: 16MiB, scheduler: cfq}}
exports:
  - {{name: a, device: d0, group: ga}}
groups:
  - {{name: ga, weight: {ga_weight}, limit: {{iops: {ga_limit}}}}}
  - {{name: gb, weight: 200}}
"""


def weights(d):
    return {g["name"]: g["weight"] for g in d.listing()["groups"]}


def main():
    checks = Checks()
    with Daemon(CONFIG.format(ga_weight=100, ga_limit=500), "reload_ctl_weight") as d:
        d.ctl("weight", "ga", "500")
        d.ctl("weight", "gb", "700")

        d.write_config(CONFIG.format(ga_weight=100, ga_limit=400))
        out = d.ctl("reload")
        w = weights(d)
        checks.check("reload 1 (ga's limit only): ga keeps ctl's weight 500", w.get("ga") == 500, f"{w}")
        checks.check("reload 1: gb keeps ctl's weight 700", w.get("gb") == 700, f"{w}")
        checks.check("reload 1: the reply says ga's ctl weight is kept",
                     "group ga: weight 500, set with ctl, kept: the file does not change the group's weight" in out,
                     out.strip())
        checks.check("reload 1: the reply does not announce the file's weight 100", "ga: weight 100" not in out,
                     out.strip())
        checks.check("reload 1: the log says so", d.wait_log("reload: group ga: weight 500, set with ctl, kept"))

        d.write_config(CONFIG.format(ga_weight=300, ga_limit=400))
        out = d.ctl("reload")
        w = weights(d)
        checks.check("reload 2 (ga's weight 300): the file's weight holds", w.get("ga") == 300, f"{w}")
        checks.check("reload 2: the reply says ctl's weight is not kept",
                     "group ga: weight 500, set with ctl, not kept: the file changes the group's to 300" in out,
                     out.strip())

        d.write_config(CONFIG.format(ga_weight=300, ga_limit=200))
        out = d.ctl("reload")
        w = weights(d)
        checks.check("reload 3 (ga's limit): ga stays 300, ctl's change forgotten", w.get("ga") == 300, f"{w}")
        checks.check("reload 3: gb still keeps ctl's 700", w.get("gb") == 700, f"{w}")
        if checks.failed:
            d.print_log_tail()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
