"""A storage whose writeback fails: acknowledged writes that never reach it
must fail every later FLUSH and FUA request, not only the first FLUSH.

The storage is a loop device over a sparse 32 MiB file on a 4 MiB tmpfs:
its writeback fails (EIO or ENOSPC) once 4 MiB are used. The daemon serves
it buffered, on each io_engine in turn. Client A writes 8 MiB, each write
acknowledged; then
  - B's FLUSH fails (the kernel reports the writeback error once);
  - A's FLUSH fails too, and so does B's second one: Linux would report the
    error only once per open file, after which fdatasync returns 0 though
    the data is lost;
  - a FUA write fails with EIO; reads and plain writes still work;
  - the log says once that the storage failed to write acknowledged data;
  - `ctl stats` shows the failure (JSON storage_error, and the table's device
    line) from then on, and showed none before it;
  - SIGTERM: the final flush fails and the daemon exits 1.
Needs root (mount, losetup): skips without it.
"""
import errno
import os
import shutil
import subprocess
import sys
import tempfile

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks, skip

MiB = 1 << 20
CONFIG = """
devices:
  - {{name: lu, backend: file, path: {path}, io_engine: {engine}}}
exports:
  - {{name: lu, device: lu}}
"""
LOGGED = "the storage failed to write acknowledged data"


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


class FailingStorage:
    """A loop device whose writes fail once its 4 MiB tmpfs is full."""

    def __init__(self):
        if os.geteuid() != 0:
            skip("needs root to mount a tmpfs and set up a loop device")
        for tool in ("mount", "umount", "losetup"):
            if not shutil.which(tool):
                skip(f"no {tool} here")
        self.mnt = tempfile.mkdtemp(prefix="nbdsched-wberr-")
        self.loop = None
        r = run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", self.mnt])
        if r.returncode != 0:
            os.rmdir(self.mnt)
            skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
        backing = os.path.join(self.mnt, "back.img")
        with open(backing, "wb") as f:
            f.truncate(32 * MiB)
        r = run(["losetup", "-f", "--show", backing])
        if r.returncode != 0:
            self.close()
            skip(f"cannot set up a loop device: {r.stderr.strip()}")
        self.loop = r.stdout.strip()

    def close(self):
        if self.loop:
            run(["losetup", "-d", self.loop])
        run(["umount", self.mnt])
        os.rmdir(self.mnt)


def fails(what, errnum=None):
    try:
        what()
    except nbd.Error as e:
        return errnum is None or e.errnum == errnum, e.errnum
    return False, 0


def one_engine(c, engine):
    storage = FailingStorage()
    try:
        try:
            d = Daemon(CONFIG.format(path=storage.loop, engine=engine), f"wberr-{engine}")
        except RuntimeError as e:
            if engine == "io_uring" and "io_uring" in str(e):
                print(f"SKIP (io_uring engine only): no ring here: {e}")
                return
            raise
        try:
            def client():
                h = nbd.NBD()
                h.set_export_name("lu")
                h.connect_unix(d.sock)
                return h
            a, b = client(), client()
            before = Daemon.device(d.stats(), "lu").get("storage_error", "absent")
            c.check(f"{engine}: ctl stats shows no storage failure at first", before is None, repr(before))
            for i in range(8):
                a.pwrite(bytes([i + 1]) * MiB, i * MiB)
            first, err = fails(b.flush)
            c.check(f"{engine}: the first FLUSH (B) fails", first, f"errno {err}")
            again, err = fails(a.flush, errno.EIO)
            c.check(f"{engine}: A's FLUSH after it fails with EIO", again, f"errno {err}")
            again, err = fails(b.flush, errno.EIO)
            c.check(f"{engine}: B's second FLUSH fails with EIO", again, f"errno {err}")
            fua, err = fails(lambda: a.pwrite(b"\x55" * 4096, 0, nbd.CMD_FLAG_FUA), errno.EIO)
            c.check(f"{engine}: a FUA write fails with EIO", fua, f"errno {err}")
            ok = a.pread(4096, MiB) == bytes([2]) * 4096
            c.check(f"{engine}: reads still work", ok)
            shown = Daemon.device(d.stats(), "lu").get("storage_error")
            c.check(f"{engine}: ctl stats --json names the storage failure", isinstance(shown, str) and shown,
                    repr(shown))
            table = d.ctl("stats")
            c.check(f"{engine}: the ctl stats table says the storage failed",
                    "storage failed (" in table and "FLUSH and FUA fail" in table, table.splitlines()[0])
            a.shutdown()
            b.shutdown()
            logged = d.log().count(LOGGED)
            c.check(f"{engine}: the failure is logged once", logged == 1, f"{logged} line(s)")
        finally:
            if c.failed:
                d.print_log_tail()
            status = d.stop()
        c.check(f"{engine}: SIGTERM exits 1 (the final flush failed)", status == 1, f"status {status}")
    finally:
        storage.close()


def main():
    c = Checks()
    for engine in ("threads", "io_uring"):
        one_engine(c, engine)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
