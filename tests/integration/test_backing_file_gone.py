"""A file device's file deleted, replaced or truncated behind the running
daemon is told once in the log; requests go on (the data lives in the file
the daemon holds open, as a loop device or nbdkit would serve it).

  - threads: after `rm`, after `mv other.img` over the path and after a
    truncation to 4 MiB, a write and a FLUSH succeed and the FLUSH logs a
    warning naming the device and what happened, once (a second FLUSH adds
    nothing);
  - io_uring (FLUSH stays on the ring and the event loop, which does not
    stat paths): the reload (SIGHUP) that follows `rm` logs it.
Before, nothing was logged at all.
"""
import os
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

MiB = 1 << 20
CONFIG = """
devices:
  - {{name: gone, backend: file, path: "{{dir}}/gone.img", size: 16MiB, io_engine: {engine}}}
  - {{name: moved, backend: file, path: "{{dir}}/moved.img", size: 16MiB, io_engine: {engine}}}
  - {{name: short, backend: file, path: "{{dir}}/short.img", size: 16MiB, io_engine: {engine}}}
exports:
  - {{name: gone, device: gone}}
  - {{name: moved, device: moved}}
  - {{name: short, device: short}}
"""
TOLD = {
    "gone": "device gone: its file {dir}/gone.img was deleted while it is served",
    "moved": "device moved: its file {dir}/moved.img was replaced or moved",
    "short": "device short: its file {dir}/short.img was truncated behind the daemon's back to 4MiB",
}


def client(d, export):
    h = nbd.NBD()
    h.set_export_name(export)
    h.connect_unix(d.sock)
    return h


def change(d):
    os.unlink(d.file("gone.img"))
    with open(d.file("other.img"), "wb") as f:
        f.truncate(16 * MiB)
    os.replace(d.file("other.img"), d.file("moved.img"))
    os.truncate(d.file("short.img"), 4 * MiB)


def threads(c):
    with Daemon(CONFIG.format(engine="threads"), "gone-threads") as d:
        handles = {name: client(d, name) for name in TOLD}
        change(d)
        for name, h in handles.items():
            h.pwrite(b"\x33" * 65536, 0)
            h.flush()
            told = TOLD[name].format(dir=d.dir)
            c.check(f"threads: {name}: the FLUSH after it logs it", d.wait_log(told, 5), told)
            h.pwrite(b"\x44" * 65536, 0, nbd.CMD_FLAG_FUA)
            h.flush()
            c.check(f"threads: {name}: requests go on", h.pread(65536, 0) == b"\x44" * 65536)
            c.check(f"threads: {name}: told once", d.log().count(told) == 1, f"{d.log().count(told)} times")
        if c.failed:
            d.print_log_tail()


def io_uring(c):
    with Daemon(CONFIG.format(engine="io_uring"), "gone-uring") as d:
        change(d)
        d.hup()
        c.check("io_uring: the reload after it finishes", d.wait_log("reload: done"))
        for name in TOLD:
            told = TOLD[name].format(dir=d.dir)
            c.check(f"io_uring: {name}: the reload logs it", d.wait_log(told, 5), told)
        h = client(d, "gone")
        h.pwrite(b"\x55" * 4096, 0, nbd.CMD_FLAG_FUA)
        h.flush()
        c.check("io_uring: requests go on", h.pread(4096, 0) == b"\x55" * 4096)
        if c.failed:
            d.print_log_tail()


def main():
    c = Checks()
    for engine in (threads, io_uring):
        engine(c)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
