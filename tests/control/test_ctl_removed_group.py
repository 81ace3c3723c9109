"""`ctl weight`, `ctl limit`, `ctl reserve` and `ctl latency-target` on a
group a reload left out of the file are refused (exit 1) with a message
naming the group: the group stays only for its open connections, and a
change to it would last until nothing (no reload or restart carries it).
Before, `ctl weight gc 500` answered ok. A group the file keeps still takes
ctl's changes, and a group the file adds back does again."""
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

CONFIG = """devices:
  - {{name: d0, backend: ram, size: 16MiB, scheduler: cfq}}
exports:
  - {{name: a, device: d0, group: ga}}
  - {{name: c, device: d0, group: {c_group}}}
groups:
  - {{name: ga}}
{gc}"""
WITH_GC = CONFIG.format(c_group="gc", gc="  - {name: gc}\n")
WITHOUT_GC = CONFIG.format(c_group="ga", gc="")


def main():
    checks = Checks()
    with Daemon(WITH_GC, "ctl_removed_group") as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("c"))   # an open connection in gc keeps the group in the table
        d.write_config(WITHOUT_GC)
        out = d.ctl("reload")
        checks.check("the reload says gc is left out", "group gc left out" in out, out.strip())
        for args in (("weight", "gc", "500"), ("limit", "gc", "iops=100"), ("reserve", "gc", "iops=10"),
                     ("latency-target", "gc", "20ms")):
            err = d.ctl(*args, expect=1)
            checks.check(f"ctl {' '.join(args)}: refused, naming the group",
                         "group gc is not in the configuration in force" in err, err.strip())
        gc = next((g for g in d.listing()["groups"] if g["name"] == "gc"), {})
        checks.check("gc's weight unchanged", gc.get("weight") == 100, str(gc))
        d.ctl("weight", "ga", "300")
        checks.check("a kept group still takes ctl weight",
                     next(g for g in d.listing()["groups"] if g["name"] == "ga")["weight"] == 300)
        h.pread(4096, 0)   # the connection in the left-out group is still served
        h.shutdown()
        d.write_config(WITH_GC)
        d.ctl("reload")
        d.ctl("weight", "gc", "400")
        checks.check("gc back in the file takes ctl weight again",
                     next(g for g in d.listing()["groups"] if g["name"] == "gc")["weight"] == 400)
        err = d.ctl("weight", "nosuch", "5", expect=1)
        checks.check("an unknown group: no group 'nosuch'", "no group 'nosuch'" in err, err.strip())
        if checks.failed:
            d.print_log_tail()
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
