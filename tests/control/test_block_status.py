"""Block status (base:allocation), NBD_CMD_CACHE and fast zero with real
clients: nbdinfo --map shows holes and data exactly (RAM, file, an export
that is a slice of its device); qemu-img convert of a 1 GiB export holding
64 MiB of data reads only the data (the export's read_bytes counter);
nbdsh-style libnbd calls for REQ_ONE, CACHE and FAST_ZERO. One daemon."""
import errno
import os
import shutil
import subprocess
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import check, skip

MiB = 1 << 20
GiB = 1 << 30
HOLE = nbd.STATE_HOLE | nbd.STATE_ZERO


def run(*argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return r.stdout


def nbdinfo_map(uri):
    """nbdinfo --map as (offset, length, type) rows; type 0 data, 3 hole."""
    rows = []
    for line in run("nbdinfo", "--map", uri).splitlines():
        fields = line.split()
        rows.append((int(fields[0]), int(fields[1]), int(fields[2])))
    return rows


def read_bytes(d, device, export):
    dev = Daemon.device(d.stats(), device)
    return next(e for e in dev["exports"] if e["name"] == export).get("read_bytes", 0)


def connect(d, export):
    h = nbd.NBD()
    h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    h.connect_uri(d.uri(export))
    return h


def main():
    for tool in ("nbdinfo", "qemu-img", "nbdcopy"):
        if not shutil.which(tool):
            skip(f"{tool} is not installed")
    config = """
devices:
  - {name: ram, backend: ram, size: 1GiB}
  - {name: disk, backend: file, path: "{dir}/disk.img", size: 64MiB}
  - {name: timed, backend: ram, size: 64MiB, profile: ssd, read_ahead_kb: 128}
exports:
  - {name: big, device: ram}
  - {name: slice, device: ram, offset: 8MiB, size: 8MiB}
  - {name: file, device: disk}
  - {name: timed, device: timed}
"""
    with Daemon(config, "block-status") as d:
        # 64 MiB of data in the 1 GiB RAM export: 16 runs of 4 MiB, 64 MiB apart.
        h = connect(d, "big")
        check(h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION), "base:allocation negotiated")
        chunk = bytes([0x5a]) * (4 * MiB)
        for i in range(16):
            h.pwrite(chunk, i * 64 * MiB)
        h.pwrite(b"\1" * 4096, 10 * MiB)        # one page inside the slice's window
        h.zero(4096, 4 * MiB - 4096)            # freed again: the first run ends a page early
        h.trim(4096, 64 * MiB)                  # and the second starts a page late
        runs = [(0, 4 * MiB - 4096), (10 * MiB, 4096), (64 * MiB + 4096, 4 * MiB - 4096)]
        runs += [(i * 64 * MiB, 4 * MiB) for i in range(2, 16)]
        want, pos = [], 0
        for off, n in runs:
            if off > pos:
                want.append((pos, off - pos, 3))
            want.append((off, n, 0))
            pos = off + n
        want.append((pos, GiB - pos, 3))
        got = nbdinfo_map(d.uri("big"))
        check(got == want, f"RAM map is exactly the written runs ({len(got)} extents)")

        # The slice export (8 MiB at device offset 8 MiB): translated and clipped.
        check(nbdinfo_map(d.uri("slice")) == [(0, 2 * MiB, 3), (2 * MiB, 4096, 0), (2 * MiB + 4096, 6 * MiB - 4096, 3)],
              "slice map: device extents translated to the window and clipped to it")

        # REQ_ONE: one extent, not longer than asked.
        seen = []

        def extents(context, offset, entries, err):
            seen.append((context, offset, list(entries)))
        h.block_status(64 * MiB, 0, extents, nbd.CMD_FLAG_REQ_ONE)
        check(seen == [(nbd.CONTEXT_BASE_ALLOCATION, 0, [4 * MiB - 4096, 0])], f"REQ_ONE: one data extent {seen}")
        seen.clear()
        h.block_status(1 * MiB, 5 * MiB, extents, nbd.CMD_FLAG_REQ_ONE)
        check(seen == [(nbd.CONTEXT_BASE_ALLOCATION, 5 * MiB, [1 * MiB, HOLE])], f"REQ_ONE clipped to the request {seen}")
        h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_BOUNDS)   # let the server judge it
        try:
            h.block_status(8 * MiB, GiB - 4 * MiB, extents)
            check(False, "block status past the end must fail")
        except nbd.Error as e:
            check(e.errnum == errno.EINVAL, f"past the end: the server's EINVAL ({e})")
        check(h.can_cache() and h.can_fast_zero(), "CACHE and FAST_ZERO advertised")
        h.cache(1 * MiB, 0)
        h.zero(4096, 200 * MiB, nbd.CMD_FLAG_FAST_ZERO)   # RAM: always cheap
        h.shutdown()
        run("nbdinfo", "--can", "cache", d.uri("big"))       # exit status 0: it can
        run("nbdinfo", "--can", "fast-zero", d.uri("big"))
        check(True, "nbdinfo --can cache and --can fast-zero")

        # qemu-img convert reads only the data, nbdcopy --no-extents all of it.
        before = read_bytes(d, "ram", "big")
        target = d.file("copy.img")
        run("qemu-img", "convert", "-f", "raw", "-O", "raw", d.uri("big"), target)
        with_extents = read_bytes(d, "ram", "big") - before
        print(f"qemu-img convert read {with_extents} bytes of a {GiB}-byte export holding {64 * MiB - 4096}")
        check(63 * MiB <= with_extents <= 66 * MiB, "qemu-img convert reads only the data (64 MiB, not 1 GiB)")
        check(os.stat(target).st_blocks * 512 < 80 * MiB, "the copy is sparse too")
        os.unlink(target)
        before = read_bytes(d, "ram", "big")
        run("nbdcopy", "--no-extents", d.uri("big"), "null:")
        without = read_bytes(d, "ram", "big") - before
        print(f"nbdcopy --no-extents read {without} bytes")
        check(without == GiB, "without block status the whole export is read")

        # File export: SEEK_DATA/SEEK_HOLE.
        f = connect(d, "file")
        f.pwrite(b"\7" * MiB, 16 * MiB)
        f.flush()
        check(nbdinfo_map(d.uri("file")) == [(0, 16 * MiB, 3), (16 * MiB, MiB, 0), (17 * MiB, 47 * MiB, 3)],
              "file map: the written MiB is data, the rest holes")
        f.cache(MiB, 16 * MiB)   # posix_fadvise(WILLNEED)
        f.zero(MiB, 16 * MiB, nbd.CMD_FLAG_FAST_ZERO)   # a punched hole: fast
        check(nbdinfo_map(d.uri("file")) == [(0, 64 * MiB, 3)], "fast zero punched the hole")
        f.shutdown()

        # Timed device: a zero costs a write, so FAST_ZERO is refused at once;
        # CACHE fills the read-ahead cache (the read after it is a hit).
        t = connect(d, "timed")
        try:
            t.zero(MiB, 0, nbd.CMD_FLAG_FAST_ZERO)
            check(False, "fast zero on a timed device must fail")
        except nbd.Error as e:
            check(e.errnum == errno.ENOTSUP, f"timed device: fast zero is ENOTSUP ({e})")
        t.zero(4096, 0)   # the ordinary zero still works
        hits = lambda: Daemon.device(d.stats(), "timed")["counters"].get("readahead_hits", 0)
        t.pread(4096, 32 * MiB)   # a first read somewhere new: a miss
        check(hits() == 0, "no read-ahead hit without CACHE")
        t.cache(256 * 1024, 16 * MiB)
        t.pread(4096, 16 * MiB + 128 * 1024)
        check(hits() >= 1, "a read after CACHE is a read-ahead hit")
        t.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
