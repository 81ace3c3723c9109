"""limits.spread_connections: a device's connections after its first run on
other event loops, and the device is then touched from several threads
under its lock. Two loops; each device gets two connections, opened one
after the other so that placement is known (a on loop 0, a2 on 1, b on 1,
b2 on 0), so both devices serve connections on both loops: a RAM device under bfq with
idling on (rotational), so requests wait in the scheduler and are
dispatched from the other loop's requests and from the idle timer on the
device's own loop, and a file device (io_uring or the I/O threads), whose
completions arrive on its own loop and are answered on each connection's.
A per-device in-flight limit of 3 makes connections wait in the device's
line and take turns freed on the other loop. Every byte reads back, both
groups are counted, ctl and metrics read the devices meanwhile, and the
daemon stops cleanly (in the tsan suite: with no race report; the
ThreadSanitizer build exits 66 on one). A device with a timing model
(ssd profile) keeps both its connections on its own loop. With
spread_connections: false every connection stays on its device's loop.
"""
import sys
import threading
import time
import urllib.request

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import free_port, wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.traffic import write_read_back
from nbdsched_test.verdict import check

BASE = """
devices:
  - {{name: d0, backend: ram, size: 16MiB, scheduler: bfq, rotational: true}}
  - {{name: d1, backend: file, path: {{dir}}/d1.img, size: 16MiB, scheduler: cfq}}
  - {{name: d2, backend: ram, size: 16MiB, scheduler: bfq, profile: ssd}}
exports:
  - {{name: a, device: d0, group: gold}}
  - {{name: a2, device: d0, group: bronze}}
  - {{name: b, device: d1, group: gold}}
  - {{name: b2, device: d1, group: bronze}}
  - {{name: c, device: d2, group: gold}}
  - {{name: c2, device: d2, group: bronze}}
groups:
  - {{name: gold, weight: 300}}
  - {{name: bronze, weight: 100}}
limits: {{threads: 2, max_inflight_per_device: 3, spread_connections: {spread}}}
metrics: 127.0.0.1:{port}
log_level: info
"""
SECONDS = 2.5
EXPORTS = ("a", "a2", "b", "b2", "c", "c2")


def run(spread):
    port = free_port()
    with TempDir("shared") as tmp, Daemon(BASE.format(port=port, spread=str(spread).lower()), "shared",
                                          workdir=tmp) as d:
        stop = threading.Event()
        results = [{} for _ in EXPORTS]
        # The two exports of a device write different halves of it.
        workers = [threading.Thread(target=write_read_back, args=(d.uri(e), i, stop, results[i]),
                                    kwargs=dict(base=i % 2 * (8 << 20), slot=8 << 10, flush_and_trim=True))
                   for i, e in enumerate(EXPORTS)]
        for n, w in enumerate(workers, start=1):
            w.start()
            check(wait_for(lambda: d.log().count("): export '") >= n, 30), f"connection {n} entered transmission")
        end = time.monotonic() + SECONDS
        rounds = 0
        while time.monotonic() < end or rounds < 3:
            d.stats()
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
            d.ctl("weight", "bronze", str(100 + rounds % 50))
            rounds += 1
        stop.set()
        for w in workers:
            w.join()
        for e, r in zip(EXPORTS, results):
            check(r.get("ops", 0) > 0 and r.get("bad") == 0, f"export {e}: {r} (every write read back)")
        stats = d.stats()
        for dev in ("d0", "d1", "d2"):
            groups = {g["name"]: g["counters"]["requests"] for g in d.device(stats, dev)["groups"]}
            check(groups.get("gold", 0) > 0 and groups.get("bronze", 0) > 0, f"device {dev} counted {groups}")
        log = d.log()
        status = d.stop()
        check(status == 0, f"the daemon stopped with {status} (66: ThreadSanitizer found a race)")
        check("ThreadSanitizer" not in d.log(), "no ThreadSanitizer report")
        return log


def main():
    log = run(True)
    for dev in ("d0", "d1"):
        for loop in (0, 1):
            check(f"on device {dev} (loop {loop}," in log, f"spread: a connection of {dev} runs on loop {loop}")
    check(log.count("on device d2 (loop 0,") == 2, "a timed device's connections both on its own loop")
    log = run(False)
    check(log.count("on device d0 (loop 0,") == 2 and log.count("on device d1 (loop 1,") == 2
          and log.count("on device d2 (loop 0,") == 2,
          "spread_connections: false: every connection on its device's loop")
    print("PASS")


if __name__ == "__main__":
    sys.exit(main())
