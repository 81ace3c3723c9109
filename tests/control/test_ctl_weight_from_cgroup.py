"""`ctl weight` on a group with `weight: from-cgroup` is refused with a
reason: the next connection its cgroup rule places would set the cgroup's
weight again (and a restart would not carry the ctl one), so accepting it
would report a change that silently goes away. A group with a number still
takes it. Needs no cgroup v2: the refusal is decided from the configuration.
"""
import sys

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import check

CONFIG = """
devices:
  - {name: d0, backend: ram, size: 16MiB, scheduler: bfq}
exports:
  - {name: e, device: d0}
groups:
  - {name: tenant, weight: from-cgroup}
  - {name: fixed, weight: 200}
rules:
  - {match: {cgroup: /nbdsched-test-tenants}, group: tenant}
"""


def weight(d, name):
    return next(g for g in d.listing()["groups"] if g["name"] == name)["weight"]


def main():
    with Daemon(CONFIG, "ctl-weight-cgroup") as d:
        before = weight(d, "tenant")
        err = d.ctl("weight", "tenant", "500", expect=1)
        check("takes its weight from its cgroup" in err, f"ctl weight on a from-cgroup group is refused: {err.strip()}")
        check(weight(d, "tenant") == before, f"its weight stays {before}")
        d.ctl("weight", "fixed", "500")
        check(weight(d, "fixed") == 500, "a group with a number is re-weighted as before")
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
