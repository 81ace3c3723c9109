"""A group's QoS limit applies to every connection whose queue is in the
group, however it got there: by its export's `group`, or by a `rules:` entry
(here by export name). And after a SIGHUP that moves an export to the
limited group, a connection made before it stays in its old, unlimited group
(docs/configuration.md: an export's group applies to connections made
afterwards) -- its requests are not gated by the new group's limit -- while
a connection made afterwards is.

Judged by the limit's own counters (`ctl stats --json`, qos.stats) and by an
upper bound on the rate (a ceiling holds on any host); the unlimited
connection is judged by the counters only, never by its speed.
"""
import sys
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

LIMIT_IOPS = 50
SECONDS = 1.5

CONFIG = """
devices:
  - {{name: d0, backend: ram, size: 64MiB, scheduler: {sched}}}
groups:
  - {{name: slow, limit: {{iops: {limit}, burst: 20ms}}}}
  - {{name: fast}}
exports:
  - {{name: byexport, device: d0, size: 16MiB, group: slow}}
  - {{name: byrule, device: d0, offset: 16MiB, size: 16MiB}}
  - {{name: moving, device: d0, offset: 32MiB, size: 16MiB, group: {moving}}}
rules:
  - {{match: {{export: byrule}}, group: slow}}
"""


def connect(d, export):
    h = nbd.NBD()
    h.connect_uri(f"nbd+unix:///{export}?socket={d.sock}")
    return h


def reads_per_second(h, seconds=SECONDS):
    n, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        h.pread(4096, (n * 4096) % (8 << 20))
        n += 1
    return n / (time.monotonic() - t0)


def delayed(d, group):
    qos = d.group(d.device(d.stats(), "d0"), group).get("qos")
    return qos["stats"]["limit_delayed"] if qos else 0


def queue_group(d, export):
    dev = next(x for x in d.listing()["devices"] if x["name"] == "d0")
    return [q["group"] for q in dev["queues"] if q["export"] == export]


def run(c, sched):
    ceiling = LIMIT_IOPS * 2   # the limit plus its burst, with room for timing
    with Daemon(CONFIG.format(sched=sched, limit=LIMIT_IOPS, moving="fast"), f"qos-placement-{sched}") as d:
        for export in ("byexport", "byrule"):
            h = connect(d, export)
            c.check(f"{sched}: a connection to '{export}' is in group slow", queue_group(d, export) == ["slow"])
            before = delayed(d, "slow")
            rate = reads_per_second(h)
            after = delayed(d, "slow")
            h.shutdown()
            print(f"{sched}: {export}: {rate:.0f} reads/s, limit_delayed {before} -> {after}")
            c.check(f"{sched}: '{export}' is held to group slow's limit", rate <= ceiling, f"{rate:.0f} <= {ceiling}/s")
            c.check(f"{sched}: group slow's limit delayed '{export}''s requests", after > before, f"{before} -> {after}")

        # SIGHUP moves 'moving' from fast into slow: the running connection stays in fast.
        old = connect(d, "moving")
        c.check(f"{sched}: before the reload 'moving' is in group fast", queue_group(d, "moving") == ["fast"])
        d.write_config(CONFIG.format(sched=sched, limit=LIMIT_IOPS, moving="slow"))
        d.hup()
        c.check(f"{sched}: reload applied", d.wait_log("reload: done"))
        before = delayed(d, "slow")
        reads_per_second(old, 0.5)
        after = delayed(d, "slow")
        c.check(f"{sched}: the running connection's queue stays in group fast", queue_group(d, "moving") == ["fast"])
        c.check(f"{sched}: its requests are not gated by group slow's limit", after == before, f"{before} -> {after}")
        new = connect(d, "moving")
        rate = reads_per_second(new)
        c.check(f"{sched}: a connection made after the reload is in group slow and limited",
                delayed(d, "slow") > after and rate <= ceiling, f"{rate:.0f} reads/s")
        new.shutdown()
        old.shutdown()
        c.check(f"{sched}: clean stop", d.stop() == 0)


def main():
    c = Checks()
    for sched in ("cfq", "none"):
        run(c, sched)
    c.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
