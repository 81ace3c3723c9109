"""A reload while the cluster does not answer. `rbd resize` grows the image
(the daemon, holding the exclusive lock, does the resize and marks its image
for a refresh); then the OSD is paused (SIGSTOP) and the daemon gets SIGHUP.
librbd's rbd_get_size refreshes the image from the OSD before it answers,
so reading the size waits (up to the device's osd_op_timeout, 20 s here).
The reload must not wait for it:
  - "reload: done" is logged before the device's size is (the size is read
    off the event loops), and meanwhile the RAM device reads and writes and
    `ctl stats` answers;
  - a second SIGHUP while the size is still being read does not ask again;
  - once the OSD goes on, the new size is applied: a new connection sees it.
Before, the reload read the size on the event loop with every loop paused:
every device waited until the OSD answered or the timeout.
Then a device without osd_op_timeout, whose size read waits for the paused
OSD for ever: SIGTERM must not wait for it longer than the drain timeout
(the final flush waits for the same refresh): exit 1, the size read named.
"""
import signal
import subprocess
import sys
import time

import nbd

from nbdsched_test.ceph import Cluster, rbd_config
from nbdsched_test.daemon import DRAIN_LIMITS, DRAIN_TIMEOUT_S, Daemon
from nbdsched_test.patterns import pattern
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

MiB = 1 << 20


def config(conf):
    return (f"devices:\n  - {rbd_config('vol', 'img1', conf, rotational='false', osd_op_timeout=20)}\n"
            "  - {name: mem, backend: ram, size: 16MiB}\n"
            "exports:\n  - {name: vol1, device: vol}\n  - {name: mem, device: mem}\n")


def size_logged(d):
    log = d.log()
    return "device vol: size 64MiB -> 96MiB" in log or "device vol: cannot read its size" in log


def main():
    c = Checks()
    tmp = TempDir("rbdreload")
    with Cluster(tmp.path, images=("img1:64M",)) as cluster:
        with Daemon(config(cluster.conf), "reload", workdir=tmp.path) as d:
            checks(c, cluster, d)
        stop_during_size_read(c, cluster, tmp)
    tmp.remove()
    return c.finish()


def checks(c, cluster, d):
    vol = nbd.NBD()
    vol.connect_uri(d.uri("vol1"))
    vol.pwrite(pattern(0, 4096, seed=1), 0, nbd.CMD_FLAG_FUA)
    mem = nbd.NBD()
    mem.connect_uri(d.uri("mem"))
    cluster.rbd("resize", "--size", "96M", "rbd/img1")
    cluster.signal_osd(signal.SIGSTOP)
    try:
        d.hup()
        c.check("the reload is done", d.wait_log("reload: done", 60))
        c.check("... before the image's size was read (the OSD is paused)", not size_logged(d))
        mem.pwrite(pattern(0, 65536, seed=2), 0)
        c.check("the RAM device reads and writes meanwhile", mem.pread(65536, 0) == pattern(0, 65536, seed=2))
        c.check("ctl answers meanwhile", len(d.stats()["devices"]) == 2)
        c.check("the image's size is still being read", not size_logged(d))
        d.hup()
        c.check("a second SIGHUP does not ask again while it is",
                d.wait_log("device vol: its size is still being read", 30))
    finally:
        cluster.signal_osd(signal.SIGCONT)
    c.check("once the OSD goes on, the new size is applied",
            d.wait_log("device vol: size 64MiB -> 96MiB", 60))
    grown = nbd.NBD()
    grown.connect_uri(d.uri("vol1"))
    c.check("a new connection sees 96 MiB", grown.get_size() == 96 * MiB, str(grown.get_size()))
    c.check("the data written before reads back", grown.pread(4096, 0) == pattern(0, 4096, seed=1))
    for h in (grown, vol, mem):
        h.shutdown()
    c.check("clean stop", d.stop() == 0)
    if c.failed:
        d.print_log_tail(40)


def stop_during_size_read(c, cluster, tmp):
    waits = DRAIN_LIMITS + f"devices:\n  - {rbd_config('vol', 'img1', cluster.conf, rotational='false')}\n" \
            "exports:\n  - {name: vol1, device: vol}\n"
    with Daemon(waits, "stuck", workdir=tmp.path) as d:
        cluster.rbd("resize", "--size", "128M", "rbd/img1")
        cluster.signal_osd(signal.SIGSTOP)
        try:
            d.hup()
            c.check("(stuck) the reload is done, the size read waits for the OSD",
                    d.wait_log("reload: done", 30) and "device vol: size" not in d.log())
            asked = time.monotonic()
            d.send(signal.SIGTERM)
            try:
                status = d.proc.wait(timeout=DRAIN_TIMEOUT_S * 3 + 30)
            except subprocess.TimeoutExpired:
                status = "still running"
            took = time.monotonic() - asked
            c.check("SIGTERM during the stuck size read: exit 1 within the drain timeouts, not when the OSD is back",
                    status == 1 and took < DRAIN_TIMEOUT_S * 2 + 15, f"status {status} after {took:.1f} s")
            c.check("the log names the device whose size read did not finish",
                    "device vol: the size read of a reload" in d.log())
            c.check("... after the final flush gave up at the configured drain timeout",
                    f"device vol: the flush at shutdown did not finish in {DRAIN_TIMEOUT_S * 1000} ms" in d.log())
        finally:
            cluster.signal_osd(signal.SIGCONT)
        if c.failed:
            d.print_log_tail(40)


if __name__ == "__main__":
    sys.exit(main())
