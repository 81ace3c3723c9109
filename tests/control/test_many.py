"""200 connections to one device, each with 8 requests in flight at once:
every request completes with the right data, and the counters add up
(device = sum of exports = sum of groups, nothing left in flight).
"""
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import check

CONNS = 200
DEPTH = 8
ROUNDS = 4
BS = 4096

CONFIG = f"""
devices:
  - {{name: d0, backend: ram, size: 64MiB, scheduler: bfq, profile: ssd}}
exports:
  - {{name: a, device: d0, size: 32MiB, group: g1}}
  - {{name: b, device: d0, offset: 32MiB, group: g2}}
groups:
  - {{name: g1, weight: 1000}}
  - {{name: g2, weight: 100}}
limits: {{max_connections: 1024}}
"""


def main():
    with Daemon(CONFIG, "many") as d:
        handles = []
        for i in range(CONNS):
            h = nbd.NBD()
            h.connect_uri(d.uri("a" if i % 2 == 0 else "b"))
            handles.append(h)
        check(len(d.listing()["devices"][0]["queues"]) == CONNS, f"{CONNS} queues open")
        # Each round: 8 writes in flight per connection, then 8 reads back.
        done = 0
        for rnd in range(ROUNDS):
            for kind in ("write", "read"):
                bufs = []
                cookies = [[] for _ in handles]
                for i, h in enumerate(handles):
                    for k in range(DEPTH):
                        off = ((i // 2) * DEPTH + k) * BS
                        if kind == "write":
                            b = nbd.Buffer.from_bytearray(bytearray([(i + k + rnd) % 251]) * BS)
                            cookies[i].append(h.aio_pwrite(b, off))
                        else:
                            b = nbd.Buffer(BS)
                            cookies[i].append(h.aio_pread(b, off))
                        bufs.append((i, k, b))
                for i, h in enumerate(handles):
                    while h.aio_in_flight() > 0:
                        h.poll(-1)
                    for cookie in cookies[i]:
                        if not h.aio_command_completed(cookie):
                            raise AssertionError(f"conn {i}: command {cookie} not completed")
                if kind == "read":
                    for i, k, b in bufs:
                        data = b.to_bytearray()
                        if data[0] != (i + k + rnd) % 251 or data[-1] != data[0]:
                            raise AssertionError(f"conn {i} req {k} round {rnd}: bad data")
                done += CONNS * DEPTH
        check(True, f"{done} requests completed with the right data")
        s = d.stats()
        dev = d.device(s, "d0")
        c = dev["counters"]
        check(c["requests"] == done and c["reads"] == done // 2 and c["writes"] == done // 2,
              f"device counts: {c['reads']} reads {c['writes']} writes")
        check(c["in_flight"] == 0 and c["errors"] == 0, "nothing in flight, no errors")
        check(sum(e["requests"] for e in dev["exports"]) == done, "exports add up")
        check(sum(g["counters"]["requests"] for g in dev["groups"]) == done, "groups add up")
        check(sum(q["counters"]["requests"] for q in dev["queues"]) == done, "queues add up")
        check(dev["sched"]["in_flight"] == 0 and dev["sched"]["queued"] == 0, "the scheduler holds nothing")
        for h in handles:
            h.shutdown()
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
