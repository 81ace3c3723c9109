"""limits.threads: two devices on two event loops. Traffic runs on both (and
connections come and go on both) while loop 0 reads and changes them:
ctl stats, ctl weight, metrics scrapes, SIGHUP reloads. Every byte reads
back and both devices count their requests. Then a planned restart
(--takeover) passes a connection of each loop to a new two-loop process,
where both go on, and both processes exit 0. In the tsan suite the daemon
is the ThreadSanitizer build, which fails its exit status (66) on a data
race.
"""
import os
import subprocess
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
  - {{name: d0, backend: ram, size: 16MiB, scheduler: cfq}}
  - {{name: d1, backend: file, path: {{dir}}/d1.img, size: 16MiB, scheduler: bfq}}
exports:
  - {{name: a, device: d0, group: gold}}
  - {{name: b, device: d1, group: bronze}}
groups:
  - {{name: gold, weight: 1000}}
  - {{name: bronze, weight: {bronze}}}
limits: {{threads: 2}}
metrics: 127.0.0.1:{port}
log_level: info
"""
SECONDS = 2.5


def churn(d, stop, result):
    """Connections that open, read once and close, on both exports: each moves to its device's loop."""
    n = 0
    while not stop.is_set():
        for export in ("a", "b"):
            h = nbd.NBD()
            h.connect_uri(d.uri(export))
            h.pread(512, 0)
            h.shutdown()
            n += 1
    result.update(connections=n)


def main():
    port = free_port()
    with TempDir("loops") as tmp, Daemon(BASE.format(bronze=100, port=port), "loops", workdir=tmp,
                                         args=["--handover-socket", os.path.join(tmp, "handover.sock")]) as d:
        check(d.wait_log("event loops: 2 (devices: d0 on 0, d1 on 1)"), "two loops, one device on each")
        stop = threading.Event()
        results = [{}, {}, {}]
        workers = [threading.Thread(target=write_read_back, args=(d.uri("a"), 1, stop, results[0])),
                   threading.Thread(target=write_read_back, args=(d.uri("b"), 2, stop, results[1])),
                   threading.Thread(target=churn, args=(d, stop, results[2]))]
        for w in workers:
            w.start()
        end = time.monotonic() + SECONDS
        rounds = scrapes = reloads = 0
        while time.monotonic() < end or rounds < 3:   # a slow (TSan, loaded) run still does each
            stats = d.stats()
            rounds += 1
            d.ctl("weight", "bronze", str(100 + rounds % 50))
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            scrapes += "nbdsched" in text
            if rounds % 3 == 1:
                d.write_config(BASE.format(bronze=200 + rounds, port=port))
                d.hup()
                reloads += 1
        stop.set()
        for w in workers:
            w.join()
        check(reloads >= 1 and d.wait_log("reload: done"), f"{reloads} reload(s) applied during traffic")
        check(scrapes == rounds, f"{scrapes} metrics scrapes of {rounds}")
        for name, r in (("a", results[0]), ("b", results[1])):
            check(r.get("ops", 0) > 0 and r.get("bad") == 0, f"export {name}: {r} (every write read back)")
        check(results[2].get("connections", 0) >= 2, f"{results[2].get('connections')} short connections")
        stats = d.stats()
        for dev in ("d0", "d1"):
            reqs = sum(g["counters"]["requests"] for g in d.device(stats, dev)["groups"])
            check(reqs >= results[0 if dev == "d0" else 1]["ops"], f"device {dev} counted {reqs} requests")
        takeover(d)
    print("PASS")


def takeover(d):
    """One connection per loop, then a new process takes both over (--force: d0 is RAM)."""
    handles = {}
    for export in ("a", "b"):
        handles[export] = nbd.NBD()
        handles[export].connect_uri(d.uri(export))
        handles[export].pwrite(export.encode() * 4096, 1 << 20)
    new_log = open(d.file("new.log"), "w")
    new = subprocess.Popen([d.binary, "--config", d.config_path, "--takeover", d.file("handover.sock"), "--force"],
                           stdout=new_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        status = d.proc.wait(30)
        check(status == 0, f"the old daemon exited {status} after the hand-over (66: ThreadSanitizer found a race)")
        check("ThreadSanitizer" not in d.log(), "no ThreadSanitizer report in the old daemon")
        with open(d.file("new.log")) as f:
            check("adopted 1 listener(s) and 2 connection(s)" in f.read(), "the new daemon adopted both")
        for export, h in handles.items():
            h.pwrite(export.encode() * 512, 0)
            check(h.pread(512, 0) == export.encode() * 512, f"export {export}: the connection goes on")
        check(handles["b"].pread(4096, 1 << 20) == b"b" * 4096, "the file device kept what was written before")
        for h in handles.values():
            h.shutdown()
        new.send_signal(15)
        status = new.wait(30)
        with open(d.file("new.log")) as f:
            log = f.read()
        check(status == 0 and "ThreadSanitizer" not in log, f"the new daemon stopped with {status}, no race report")
    finally:
        if new.poll() is None:
            new.kill()
            new.wait()
        new_log.close()


if __name__ == "__main__":
    sys.exit(main())
