"""An image shrunk (`rbd resize --allow-shrink`) while the daemon serves it,
before the reload that applies the new size, on a real one-host cluster.
librbd clips a request to its own size at once, so a write across the new
end would complete with its tail dropped:
  - a write (FUA or not) and a write-zeroes across the new end, and a
    write past it, fail with ENOSPC; the bytes before the new end that
    such a write covered keep what they held (nothing half-written);
  - a write inside the new end succeeds and reads back; a read across the
    new end fails (librbd's EIO);
  - the reload then applies the new size.
"""
import time

import nbd

from nbdsched_test.ceph import one_rbd_export, run_checks
from nbdsched_test.daemon import Daemon

MiB = 1 << 20
NEW_END = 32 * MiB


def error_of(request):
    """The error text of a request that failed, "" when it succeeded."""
    try:
        request()
        return ""
    except nbd.Error as e:
        return str(e)


def shrink_checks(c, cluster, tmp):
    cluster.rbd("create", "--size", "64M", "rbd/shr")
    d = Daemon(one_rbd_export(cluster.conf, "shr"), "shr", workdir=tmp.path)
    try:
        h = nbd.NBD()
        h.connect_uri(d.uri("vol"))
        h.pwrite(b"k" * 8192, NEW_END - 8192, nbd.CMD_FLAG_FUA)
        cluster.rbd("resize", "--size", "32M", "--allow-shrink", "rbd/shr")
        time.sleep(1)   # the update watch tells the daemon of the resize on a librbd thread, soon after
        requests = {
            "a FUA write across the new end": lambda: h.pwrite(b"w" * 8192, NEW_END - 4096, nbd.CMD_FLAG_FUA),
            "a write across the new end": lambda: h.pwrite(b"w" * 8192, NEW_END - 4096),
            "a write-zeroes across the new end": lambda: h.zero(8192, NEW_END - 4096, nbd.CMD_FLAG_NO_HOLE),
            "a write past the new end": lambda: h.pwrite(b"w" * 4096, NEW_END + 4 * MiB),
        }
        for name, request in requests.items():
            error = error_of(request)
            c.check(f"{name} fails with ENOSPC", "ENOSPC" in error, error or "it succeeded")
        c.check("the block before the new end those covered keeps what it held",
                h.pread(4096, NEW_END - 4096) == b"k" * 4096)
        h.pwrite(b"i" * 4096, NEW_END - 8192, nbd.CMD_FLAG_FUA)
        c.check("a write inside the new end succeeds and reads back", h.pread(4096, NEW_END - 8192) == b"i" * 4096)
        error = error_of(lambda: h.pread(8192, NEW_END - 4096))
        c.check("a read across the new end fails", error != "", error or "it succeeded")
        h.shutdown()
        d.hup()
        c.check("the reload applies the new size", d.wait_log("device vol: size 64MiB -> 32MiB", 30))
        c.check("clean stop", d.stop() == 0)
    finally:
        if c.failed:
            d.print_log_tail(20)
        d.stop()


if __name__ == "__main__":
    run_checks("rbd-shrink", shrink_checks)
