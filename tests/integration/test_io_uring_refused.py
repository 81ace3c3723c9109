"""A kernel that refuses io_uring: the daemon runs under deny_io_uring (a
seccomp filter that makes io_uring_setup fail with EPERM, as
kernel.io_uring_disabled=2 or a container's profile does).

  - io_engine: auto: the file device starts, logs the fallback once, `ctl
    list` says its I/O runs on the threads, and writes (plain, FUA), FLUSH
    and reads give back the data, which is in the file too;
  - io_engine: io_uring: the daemon does not start; it exits non-zero
    with an error naming io_uring and the device;
  - the same auto configuration without the filter gets a ring (where this
    kernel gives one), so it is the filter that made the difference.
"""
import os
import subprocess
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.patterns import pattern
from nbdsched_test.verdict import check, skip

MiB = 1 << 20
CONFIG = """
devices:
  - {{name: f, backend: file, path: "{{dir}}/f.img", size: 16MiB, io_engine: {engine}}}
exports:
  - {{name: default, device: f}}
"""
FALLBACK = "device f: io_uring unavailable (io_uring_queue_init: Operation not permitted): using the I/O threads"


def deny_wrapper():
    path = os.environ.get("DENY_IO_URING", "")
    if not path or not os.access(path, os.X_OK):
        skip(f"no deny_io_uring helper at '{path}' (set DENY_IO_URING)")
    r = subprocess.run([path, "true"], capture_output=True, text=True)
    if r.returncode != 0:
        skip(f"cannot install a seccomp filter here: {r.stderr.strip()}")
    return [path]


def io_engine(d):
    return d.listing()["devices"][0]["io_engine"]


def main():
    wrapper = deny_wrapper()

    with Daemon(CONFIG.format(engine="auto"), "auto", wrapper=wrapper) as d:
        log = d.log()
        check(FALLBACK in log, "io_engine auto: one line says the ring was refused and the threads serve")
        check(log.count("io_uring unavailable") == 1, "logged once")
        check(io_engine(d) == "threads", f"ctl list: I/O on {io_engine(d)}")
        check("I/O on threads" in d.ctl("list"), "ctl list (table) says so too")
        h = nbd.NBD()
        h.connect_uri(d.uri("default"))
        writes = [(0, 4096, 1, 0), (5 * MiB + 512, 70000, 2, 0), (16 * MiB - 8192, 8192, 3, nbd.CMD_FLAG_FUA)]
        for offset, length, seed, flags in writes:
            h.pwrite(pattern(offset, length, seed), offset, flags)
        h.flush()
        check(all(h.pread(length, offset) == pattern(offset, length, seed) for offset, length, seed, _ in writes),
              "writes (plain and FUA) read back")
        with open(os.path.join(d.dir, "f.img"), "rb") as f:
            on_disk = []
            for offset, length, seed, _ in writes:
                f.seek(offset)
                on_disk.append(f.read(length) == pattern(offset, length, seed))
        check(all(on_disk), "after FLUSH the data is in the file")
        stats = d.device(d.stats(), "f")["counters"]
        check(stats["errors"] == 0 and stats["writes"] == 3, f"device counters: {stats['writes']} writes, "
              f"{stats['errors']} errors")
        h.shutdown()
        check(d.stop() == 0, "clean stop")

    d = Daemon(CONFIG.format(engine="io_uring"), "uring", wrapper=wrapper, wait=False)
    try:
        status = d.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        status = None
    log = d.log()
    d.stop()
    check(status not in (None, 0), f"io_engine io_uring: the daemon does not start (exit status {status})")
    named = ("device f: io_engine: io_uring, but io_uring is unavailable (io_uring_queue_init: Operation not "
             "permitted)") in log
    if not named:
        print(log)
    check(named, "its error names the device and io_uring")

    with Daemon(CONFIG.format(engine="auto"), "ring") as d:
        if "io_uring unavailable" in d.log():
            print("note: this kernel refuses io_uring even without the filter")
        else:
            check(io_engine(d) == "io_uring", "without the filter the same device gets a ring")
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
