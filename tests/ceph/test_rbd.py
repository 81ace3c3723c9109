"""backend: rbd on a real one-host cluster (tests/ceph/cluster.sh), one
cluster for the whole file:
  - the export's size is the image's; writes (plain, FUA), FLUSH, TRIM and
    WRITE_ZEROES read back through nbdsched and through `rbd export` (so the
    data is in the cluster, not only in the daemon); no read-ahead by
    default (sequential reads are no read-ahead hits);
  - block status (base:allocation) on the fresh image: holes where nothing
    was written, data where two extents were, a hole again where a whole
    object was discarded, at most 64 objects per reply;
  - resize seen on reload: after `rbd resize` and SIGHUP a new connection
    sees the new size (grown: the new tail is served; shrunk: smaller), a
    connection opened before keeps the size it negotiated and keeps
    working, and after a shrink a connection's requests past the new end
    fail with EINVAL (the daemon serves on);
  - a planned restart (`--takeover`) under a client that writes and
    verifies all the time: a new process that fails after it took the
    image's lock leaves the old one serving (it takes the lock back); one
    that failed and kept the lock (played by the test through librbd's
    Python binding) has it broken by the old daemon and cannot write; then
    a new process takes over (the old one releases the lock once its
    requests are answered and flushed, the new one takes it before it
    reads a request): no request fails, every block reads back, the old
    daemon exits 0; the connections opened before go on with the new one;
  - one writer per image: a second daemon on the image does not start and
    names the lock's holder, at once (the live holder refuses: no line
    about waiting for the lock); with --break-lock it starts, serves the data,
    and the first daemon's writes fail (its client is blocklisted);
  - the cluster gone: a FUA write and a block status fail with EIO after
    the device's osd_op_timeout instead of hanging, the daemon's RAM device keeps
    serving meanwhile, and the daemon still stops on SIGTERM.
"""
import errno
import os
import random
import subprocess
import sys
import threading
import time

import nbd

from nbdsched_test.ceph import Cluster, LockThief, rbd_config
from nbdsched_test.daemon import Daemon
from nbdsched_test.patterns import pattern
from nbdsched_test.process import wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

MiB = 1 << 20
# A write and a flush: they must reach the OSD (a read may come from
# librbd's cache, or be answered from the object map without the cluster).
WRITE_ONE = """import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
try:
    h.pwrite(bytes(4096), 32 << 20, nbd.CMD_FLAG_FUA)
except nbd.Error as e:
    sys.exit(f"write failed: {e} (errno {e.errno})")
"""
# Block status needs the OSDs too (librbd's diff asks them per object).
STATUS_ONE = """import nbd, sys
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri(sys.argv[1])
try:
    h.block_status(4 << 20, 40 << 20, lambda *a: 0)
except nbd.Error as e:
    sys.exit(f"block status failed: {e} (errno {e.errno})")
"""
TIMEOUT = 2   # osd_op_timeout of the daemon that sees the cluster go
# Small objects, so that the 64 objects block status scans per reply
# (backend/rbd_extents.cpp) are half of the image.
OBJECT_SIZE, SCAN_OBJECTS = 512 << 10, 64


def config(conf, **rbd_keys):
    return (f"devices:\n  - {rbd_config('vol', 'img1', conf, scheduler='bfq', rotational='false', **rbd_keys)}\n"
            "  - {name: mem, backend: ram, size: 16MiB}\n"
            "exports:\n  - {name: vol1, device: vol}\n  - {name: mem, device: mem}\n")


def connect(d, export, allocation=False):
    h = nbd.NBD()
    if allocation:
        h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    h.connect_uri(d.uri(export))
    return h


def allocation(h, length, offset):
    """[(offset, length, hole)] for [offset, offset+length), asking again
    where a reply covers less than asked (NBD allows it)."""
    runs, end = [], offset + length
    while offset < end:
        got = []

        def extents(meta, at, entries, err):
            got.extend((entries[i], entries[i + 1]) for i in range(0, len(entries), 2))

        h.block_status(end - offset, offset, extents)
        for n, flags in got:
            n = min(n, end - offset)
            runs.append((offset, n, bool(flags & nbd.STATE_HOLE)))
            offset += n
    return runs


def covered(runs, offset, length, hole):
    """[offset, offset+length) lies in runs of the given kind only."""
    return all(h == hole for at, n, h in runs if at < offset + length and offset < at + n)


def block_status_checks(c, d):
    """On the fresh image (512 KiB objects), in a region io_checks does not
    write: 64 KiB at 41 MiB and 8 KiB at 52 MiB."""
    h = connect(d, "vol1", allocation=True)
    c.check("base:allocation negotiated on rbd", h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION))
    got = []
    h.block_status(64 * MiB, 0, lambda meta, at, entries, err: got.extend(entries[0::2]))
    c.check(f"one reply covers at most {SCAN_OBJECTS} objects (the rest on the next request)",
            sum(got) == SCAN_OBJECTS * OBJECT_SIZE, f"{sum(got)} bytes")
    h.pwrite(pattern(41 * MiB, 64 << 10, seed=6), 41 * MiB)
    h.pwrite(pattern(52 * MiB, 8 << 10, seed=7), 52 * MiB)
    h.flush()
    runs = allocation(h, 28 * MiB, 36 * MiB)
    c.check("block status: the two written extents are data",
            covered(runs, 41 * MiB, 64 << 10, False) and covered(runs, 52 * MiB, 8 << 10, False), str(runs))
    c.check("block status: never-written objects are holes (36-40, 44-52, 56-64 MiB)",
            covered(runs, 36 * MiB, 4 * MiB, True) and covered(runs, 44 * MiB, 8 * MiB, True)
            and covered(runs, 56 * MiB, 8 * MiB, True), str(runs))
    c.check("block status: not all data (the old answer)", any(hole for _, _, hole in runs), str(runs))
    h.trim(4 * MiB, 52 * MiB)
    h.flush()
    runs = allocation(h, 28 * MiB, 36 * MiB)
    c.check("block status: a discarded object is a hole again, the other extent still data",
            covered(runs, 52 * MiB, 4 * MiB, True) and covered(runs, 41 * MiB, 64 << 10, False), str(runs))
    c.check("the holes read as zeros", h.pread(64 << 10, 36 * MiB) == bytes(64 << 10)
            and h.pread(8 << 10, 52 * MiB) == bytes(8 << 10))
    h.shutdown()


def rbd_bytes(cluster, offset, length):
    out = subprocess.run(["rbd", "-c", cluster.conf, "export", "rbd/img1", "-"], capture_output=True,
                         timeout=60, check=True).stdout
    return out[offset:offset + length]


def io_checks(c, cluster, d):
    h = connect(d, "vol1")
    c.check("size is the image's (64 MiB)", h.get_size() == 64 * MiB, str(h.get_size()))
    h.pwrite(pattern(0, 1 * MiB, seed=3), 0)
    h.pwrite(pattern(8 * MiB, 64 << 10, seed=4), 8 * MiB, nbd.CMD_FLAG_FUA)
    h.pwrite(pattern(16 * MiB, 1 * MiB, seed=5), 16 * MiB)
    h.trim(256 << 10, 16 * MiB)
    h.zero(128 << 10, 16 * MiB + (512 << 10))
    h.zero(64 << 10, 16 * MiB + (768 << 10), nbd.CMD_FLAG_NO_HOLE)   # written zeros, not a hole
    h.flush()
    c.check("plain write reads back", h.pread(1 * MiB, 0) == pattern(0, 1 * MiB, seed=3))
    c.check("FUA write reads back", h.pread(64 << 10, 8 * MiB) == pattern(8 * MiB, 64 << 10, seed=4))
    expect = bytearray(pattern(16 * MiB, 1 * MiB, seed=5))
    expect[:256 << 10] = bytes(256 << 10)
    expect[512 << 10:640 << 10] = bytes(128 << 10)
    expect[768 << 10:832 << 10] = bytes(64 << 10)
    c.check("TRIM and WRITE_ZEROES read as zeros, the rest kept", h.pread(1 * MiB, 16 * MiB) == expect)
    c.check("the cluster has the data (rbd export)",
            rbd_bytes(cluster, 8 * MiB, 64 << 10) == pattern(8 * MiB, 64 << 10, seed=4))
    c.check("ctl stats count the device's writes", d.device(d.stats(), "vol")["counters"]["writes"] >= 3)
    # No read-ahead by default on an image (docs/rbd.md): sequential reads
    # go to librbd as they come, none is answered from a prefetch.
    for i in range(16):
        h.pread(64 << 10, i * (64 << 10))
    c.check("read-ahead is off by default on an RBD device",
            "non-rotational, read-ahead off" in d.log()
            and d.device(d.stats(), "vol")["counters"]["readahead_hits"] == 0, d.log_tail(40))
    return h


def resize(c, cluster, d, size_mib, was_mib):
    t0 = time.monotonic()
    cluster.rbd("resize", "--size", f"{size_mib}M", "--allow-shrink", "rbd/img1")
    took = time.monotonic() - t0
    d.hup()
    c.check(f"reload: the daemon reads the image's new size ({was_mib} -> {size_mib} MiB)",
            d.wait_log(f"device vol: size {was_mib}MiB -> {size_mib}MiB"), f"rbd resize {took:.1f} s")


def resize_checks(c, cluster, d):
    """The image grows to 96 MiB, then shrinks back to 64 MiB (the data
    below kept) for the checks after it."""
    old = connect(d, "vol1")
    old.set_strict_mode(0)   # let requests past the end reach the daemon
    resize(c, cluster, d, 96, 64)
    grown = connect(d, "vol1")
    grown.set_strict_mode(0)
    c.check("grown: a new connection sees 96 MiB", grown.get_size() == 96 * MiB, str(grown.get_size()))
    grown.pwrite(pattern(90 * MiB, 64 << 10, seed=8), 90 * MiB, nbd.CMD_FLAG_FUA)
    c.check("grown: the new tail is written and read back",
            grown.pread(64 << 10, 90 * MiB) == pattern(90 * MiB, 64 << 10, seed=8))
    c.check("grown: the old connection keeps its 64 MiB", old.get_size() == 64 * MiB, str(old.get_size()))
    c.check("grown: the old connection still reads", old.pread(64 << 10, 0) == pattern(0, 64 << 10, seed=3))
    try:
        old.pread(4096, 80 * MiB)
        c.check("grown: the old connection's requests past its own 64 MiB are refused", False)
    except nbd.Error as e:
        c.check("grown: the old connection's requests past its own 64 MiB are refused", e.errnum == errno.EINVAL,
                str(e))
    old.shutdown()
    resize(c, cluster, d, 64, 96)
    h = connect(d, "vol1")
    c.check("shrunk: a new connection sees 64 MiB", h.get_size() == 64 * MiB, str(h.get_size()))
    h.shutdown()
    try:
        grown.pwrite(bytes(4096), 80 * MiB)
        c.check("shrunk: a write past the new end on a connection that saw 96 MiB fails", False)
    except nbd.Error as e:
        c.check("shrunk: a write past the new end on a connection that saw 96 MiB fails with EINVAL",
                e.errnum == errno.EINVAL, str(e))
    c.check("shrunk: that connection still serves below the end",
            grown.pread(64 << 10, 0) == pattern(0, 64 << 10, seed=3))
    grown.shutdown()


class Writer(threading.Thread):
    """Batches of 4 writes of distinct 4 KiB blocks in 20-28 MiB, then
    their reads, verified; remembers every block's content."""
    BASE, BLOCKS = 20 * MiB, 2048

    def __init__(self, uri):
        super().__init__(daemon=True)
        self.h = nbd.NBD()
        self.h.connect_uri(uri)
        self.stop, self.blocks, self.batches, self.error, self.seq = threading.Event(), {}, 0, None, 0

    def run(self):
        try:
            while not self.stop.is_set():
                data = {}
                for b in random.sample(range(self.BLOCKS), 4):
                    self.seq += 1
                    data[b] = self.seq.to_bytes(8, "little") * 512
                self.wait([self.h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(v)), self.BASE + b * 4096)
                           for b, v in data.items()])
                bufs = {b: nbd.Buffer(4096) for b in data}
                self.wait([self.h.aio_pread(buf, self.BASE + b * 4096) for b, buf in bufs.items()])
                for b, v in data.items():
                    if bufs[b].to_bytearray() != v:
                        raise AssertionError(f"block {b} read back wrong")
                self.blocks.update(data)
                self.batches += 1
        except Exception as e:   # reported by the main thread
            self.error = e

    def wait(self, cookies):
        while self.h.aio_in_flight() > 0:
            self.h.poll(-1)
        for cookie in cookies:
            self.h.aio_command_completed(cookie)   # raises on an error reply

    def goes_on(self, batches=5):
        before = self.batches
        return wait_for(lambda: self.batches >= before + batches or self.error, 15) and not self.error


def lock_thief_checks(c, cluster, tmp, d, writer):
    """A new process that took the image's lock and failed without letting
    go of it, played by hand (LockThief). The old daemon breaks that lock
    (blocklisting its holder) and serves on; the holder cannot write any
    more."""
    thief = LockThief(cluster, tmp.file("handover.sock"), "img1", ask="takeover force")
    c.check("lock thief: the old daemon hands over", thief.reply.startswith("state "))
    c.check("lock thief: the old daemon breaks the lock, takes it back and serves on, the writer without an error",
            writer.goes_on() and d.wait_log("took its lock back from client."), str(writer.error))
    error = thief.write_error(Writer.BASE)
    c.check("lock thief: its writes fail (blocklisted)", error != "", error)
    thief.close()


def handover_checks(c, cluster, tmp, d, started):
    """d serves hand-overs on handover.sock, and hands over to a new daemon;
    each daemon it starts goes into `started` at once (main stops them all)."""
    # --force: the RAM device beside it starts empty in the new process.
    takeover = ["--takeover", tmp.file("handover.sock"), "--force"]
    writer = Writer(d.uri("vol1"))
    writer.start()
    c.check("hand-over: the writer runs", writer.goes_on(), str(writer.error))
    # Its control socket cannot be made (under a regular file): it fails
    # after the image's lock was handed to it.
    with open(tmp.file("not-a-dir"), "w"):
        pass
    bad = Daemon(config(cluster.conf) + f"control: {tmp.file('not-a-dir')}/ctl.sock\n", "failing", workdir=tmp.path,
                 wait=False, args=takeover)
    started.append(bad)
    status = bad.proc.wait(30)
    bad.stop()
    c.check("hand-over: a new process that cannot make its control socket fails", status != 0, bad.log_tail(5))
    c.check("... and the old one takes the lock back and serves on, the writer without an error",
            d.alive() and writer.goes_on() and "hand-over failed" in d.log()
            and "after the failed hand-over" not in d.log(), str(writer.error))
    lock_thief_checks(c, cluster, tmp, d, writer)
    # The same listen: as the old daemon's: a hand-over applies the new one's.
    new = Daemon(config(cluster.conf) + f"listen: [{{unix: {d.sock}}}]\n", "second-gen", workdir=tmp.path,
                 wait=False, args=takeover)
    started.append(new)
    new.sock = d.sock
    try:
        status = d.proc.wait(30)
    except subprocess.TimeoutExpired:
        status = "still running"
    c.check("hand-over: the old daemon exits 0", status == 0, f"{status}: {d.log_tail(5)}")
    c.check("hand-over: the new daemon took the image's lock and the connections",
            new.wait_log("hand-over: adopted 1 listener(s)") and new.alive(), new.log_tail(10))
    c.check("hand-over: the writer goes on with the new daemon, no request failed", writer.goes_on(),
            str(writer.error))
    writer.stop.set()
    writer.join(20)
    h = connect(new, "vol1")
    bad_blocks = [b for b, v in writer.blocks.items() if h.pread(4096, Writer.BASE + b * 4096) != v]
    c.check(f"hand-over: all {len(writer.blocks)} blocks written across it read back on a new connection",
            not bad_blocks and writer.error is None, f"{len(bad_blocks)} wrong, error {writer.error}")
    h.shutdown()
    writer.h.shutdown()


def lock_checks(c, cluster, tmp, first_handle, started):
    """The breaker daemon (with --break-lock), serving the image now; each
    daemon it starts goes into `started` at once (main stops them all)."""
    second = tmp.file("second")
    os.mkdir(second)
    try:
        started.append(Daemon(config(cluster.conf), "second", workdir=second))
        started[-1].stop()
        c.check("a second daemon on the image does not start", False)
    except RuntimeError as e:
        text = str(e)
        c.check("a second daemon on the image does not start", "exited with status" in text, text[-400:])
        c.check("its error names the holder and says --break-lock",
                "locked by client." in text and "--break-lock" in text, text[-400:])
        with open(os.path.join(second, "second.log")) as f:
            log = f.read()
        c.check("... at once: the live holder refused, no line about waiting for the lock",
                "locked by client." in log and "which does not answer: waiting for it" not in log, log[-400:])
    breaker = Daemon(config(cluster.conf, osd_op_timeout=TIMEOUT), "breaker", workdir=second, args=["--break-lock"])
    started.append(breaker)
    h = connect(breaker, "vol1")
    c.check("--break-lock: the new daemon serves the image's data", h.pread(1 * MiB, 0) == pattern(0, 1 * MiB, seed=3))
    try:
        first_handle.pwrite(b"x" * 4096, 0)
        first_handle.flush()
        c.check("the broken holder's writes fail", False)
    except nbd.Error as e:
        c.check("the broken holder's writes fail", True, str(e))
    c.check("and did not reach the image", h.pread(4096, 0) == pattern(0, 4096, seed=3))
    h.shutdown()
    return breaker


def cluster_gone_checks(c, cluster, d):
    mem = connect(d, "mem")
    cluster.stop()
    t0 = time.monotonic()
    # In a child: a request that hangs must not hang the test.
    child, status_child = (subprocess.Popen([sys.executable, "-c", script, d.uri("vol1")], stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, text=True)
                           for script in (WRITE_ONE, STATUS_ONE))
    served, status_waited = 0, None
    while child.poll() is None and time.monotonic() - t0 < TIMEOUT + 20:
        mem.pwrite(pattern(served * 4096, 4096), served * 4096)
        served += mem.pread(4096, served * 4096) == pattern(served * 4096, 4096)
        if status_waited is None and status_child.poll() is not None:
            status_waited = time.monotonic() - t0
        time.sleep(0.05)
    waited = time.monotonic() - t0
    if status_waited is None:
        try:
            status_child.wait(timeout=max(0.0, t0 + TIMEOUT + 15 - time.monotonic()))
            status_waited = time.monotonic() - t0
        except subprocess.TimeoutExpired:
            pass
    for p in (child, status_child):
        if p.poll() is None:
            p.kill()
    out, status_out = child.communicate()[0], status_child.communicate()[0]
    c.check(f"cluster gone: a FUA write fails within osd_op_timeout ({TIMEOUT} s) + slack",
            child.returncode not in (0, None) and TIMEOUT - 1 < waited < TIMEOUT + 15,
            f"{waited:.1f} s, exit {child.returncode}")
    c.check("... with EIO", "EIO" in out, out.strip()[-200:])
    c.check("block status fails with EIO too, within osd_op_timeout + slack",
            status_waited is not None and status_waited < TIMEOUT + 15 and "EIO" in status_out,
            f"{'never' if status_waited is None else f'{status_waited:.1f} s'}: {status_out.strip()[-200:]}")
    c.check("the RAM device kept serving meanwhile", served >= 10, f"{served} write+read rounds")
    t0 = time.monotonic()
    status = d.stop()
    c.check("the daemon stops on SIGTERM with its cluster gone", status == 0 and time.monotonic() - t0 < 20,
            f"status {status}, {time.monotonic() - t0:.1f} s")


def main():
    c = Checks()
    tmp = TempDir("rbd")
    daemons = []
    try:
        with Cluster(tmp.path, ["img1:64M"]) as cluster:
            cluster.rbd("rm", "rbd/img1")
            cluster.rbd("create", "--size", "64M", "--object-size", str(OBJECT_SIZE), "rbd/img1")
            try:
                daemons.append(Daemon(config(cluster.conf), "first", workdir=tmp.path,
                                      args=["--handover-socket", tmp.file("handover.sock")]))
                block_status_checks(c, daemons[0])
                handle = io_checks(c, cluster, daemons[0])
                resize_checks(c, cluster, daemons[0])
                handover_checks(c, cluster, tmp, daemons[0], daemons)
                cluster_gone_checks(c, cluster, lock_checks(c, cluster, tmp, handle, daemons))
            except BaseException:
                c.failed.append("exception")
                raise
            finally:
                for d in daemons:   # while the cluster is up: a daemon flushes as it stops
                    if c.failed:
                        d.print_log_tail()
                    d.stop(timeout=10)
    finally:
        tmp.remove()
    c.finish()


if __name__ == "__main__":
    main()
