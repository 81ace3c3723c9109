"""Read-ahead across a size change seen on reload (SIGHUP): a file device
with no size: takes its size from the file. Read-ahead caches [8, 16) MiB;
the file shrinks to 8 MiB (reload), then grows back to 16 MiB (reload), the
new part a hole. A read there returns the file's zeros, not the bytes cached
before the shrink. After the grow, a sequential reader past the old end is
read ahead again (the window follows the new size).
"""
import os
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check

KiB, MiB = 1 << 10, 1 << 20


def size_of(d):
    h = nbd.NBD()
    h.connect_uri(d.uri("f"))
    size = h.get_size()
    h.shutdown()
    return size


def hits(d):
    return Daemon.device(d.stats(), "f")["counters"].get("readahead_hits", 0)


def resize(d, img, size):
    os.truncate(img, size)
    d.hup()
    check(wait_for(lambda: size_of(d) == size, 10), f"size {size // MiB} MiB seen on reload")


def read_sequentially(h, start, end, want):
    for off in range(start, end, 128 * KiB):
        if h.pread(128 * KiB, off) != want * (128 * KiB):
            return False
    return True


def main():
    tmp = TempDir("ra-resize")
    img = tmp.file("f.img")
    with open(img, "wb") as f:
        f.write(b"\xab" * (16 * MiB))
    config = f"""
devices:
  - {{name: f, backend: file, path: "{img}", read_ahead_kb: 1024}}
exports:
  - {{name: f, device: f}}
"""
    with Daemon(config, "ra-resize") as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("f"))
        check(read_sequentially(h, 8 * MiB, 16 * MiB, b"\xab"), "old contents read sequentially")
        h.shutdown()
        check(hits(d) > 0, "read-ahead served the reader")

        resize(d, img, 8 * MiB)
        resize(d, img, 16 * MiB)
        h = nbd.NBD()
        h.connect_uri(d.uri("f"))
        got = h.pread(4 * KiB, 12 * MiB)
        check(got == bytes(4 * KiB), f"the grown part reads as the file's zeros (got {got[:4].hex()})")

        before = hits(d)
        check(read_sequentially(h, 8 * MiB, 16 * MiB, b"\0"), "a sequential read past the old end")
        check(hits(d) - before > 16, f"read ahead past the old end ({hits(d) - before} hits)")
        h.shutdown()
        check(d.stop() == 0, "clean stop")
    tmp.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
