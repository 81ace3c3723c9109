"""What an idle connection costs the daemon: 1,000 NBD connections in the
transmission phase (a raw fixed-newstyle handshake each, NBD_OPT_EXPORT_NAME)
raise its resident set (VmRSS) by at most 64 KiB each; and still at most
that once each has had 8 writes and then 8 reads of 4 KiB in flight at
once (more than its small read buffer holds) and gone idle again: data
buffers go back to a pool the connections share, not stay with each. The
blocks written were written once before, so the RAM device's pages are
not counted.
"""
import resource
import socket
import struct
import sys

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import rss_bytes
from nbdsched_test.raw_nbd import (CLIENT_FLAGS, CMD_READ, CMD_WRITE, IHAVEOPT, NBDMAGIC, OPT_EXPORT_NAME, REQUEST_MAGIC,
                                   SIMPLE_REPLY_MAGIC, exactly, send_request)
from nbdsched_test.verdict import check, skip

CONNS = 1000
WARM = 16   # connections made first: the daemon's one-time allocations are not charged to the 1,000
BOUND = 64 << 10
BS = 4096
DEPTH = 8   # requests in flight per connection

CONFIG = f"""
devices:
  - {{name: d0, backend: ram, size: 48MiB}}
exports:
  - {{name: a, device: d0}}
limits: {{max_connections: {CONNS + WARM + 8}}}
log_level: warn
"""

def connect(path):
    """A socket past the handshake. Everything the client says is sent at
    once (the server reads it after its greeting)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.sendall(struct.pack(">IQII", CLIENT_FLAGS, IHAVEOPT, OPT_EXPORT_NAME, 1) + b"a")
    return s


def finish_handshake(s):
    greeting = exactly(s, 18)
    if greeting[:8] != NBDMAGIC:
        raise AssertionError(f"bad greeting {greeting!r}")
    size, _flags = struct.unpack(">QH", exactly(s, 10))
    return size


def read_reply(s, cookie, length=0):
    magic, error, got = struct.unpack(">IIQ", exactly(s, 16))
    if magic != SIMPLE_REPLY_MAGIC or error != 0 or got != cookie:
        raise AssertionError(f"reply magic {magic:#x} error {error} cookie {got} (expected {cookie})")
    return exactly(s, length) if length else b""


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        skip(f"open files limited to {hard}, {need} needed")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))   # the daemon inherits it


def exercise(socks, seed):
    """On one connection after the other: DEPTH writes of 4 KiB (its own
    blocks) sent at once, their replies, then DEPTH reads of them, checked.
    One connection at a time: what stays is what a connection keeps, not
    what the allocator keeps after 8,000 requests in flight at once."""
    def block(i, k):
        return bytes([(i * DEPTH + k + seed) & 0xFF]) * BS
    for i, s in enumerate(socks):
        for kind in (CMD_WRITE, CMD_READ):
            s.sendall(b"".join(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, kind, k, (i * DEPTH + k) * BS, BS) +
                               (block(i, k) if kind == CMD_WRITE else b"") for k in range(DEPTH)))
            for k in range(DEPTH):
                data = read_reply(s, k, BS if kind == CMD_READ else 0)
                if kind == CMD_READ and data != block(i, k):
                    raise AssertionError(f"connection {i} block {k}: read back other data")


def prefill(s, length):
    """Writes [0, length) once, 1 MiB at a time."""
    chunk = 1 << 20
    for k in range(length // chunk):
        send_request(s, CMD_WRITE, k, k * chunk, chunk, bytes([0xA5]) * chunk)
    for k in range(length // chunk):
        read_reply(s, k)


def main():
    raise_fd_limit(2 * (CONNS + WARM) + 64)
    with Daemon(CONFIG, "idle", control=False) as d:
        warm = [connect(d.sock) for _ in range(WARM)]
        for s in warm:
            finish_handshake(s)
        prefill(warm[0], CONNS * DEPTH * BS)
        exercise(warm, 1)
        before = rss_bytes(d.pid)
        socks = [connect(d.sock) for _ in range(CONNS)]
        sizes = {finish_handshake(s) for s in socks}
        check(sizes == {48 << 20}, f"{CONNS} connections in transmission on the 48 MiB export")
        idle = rss_bytes(d.pid)
        per = (idle - before) / CONNS
        print(f"VmRSS {before >> 10} KiB -> {idle >> 10} KiB: {per / 1024:.1f} KiB per idle connection")
        check(per <= BOUND, f"an idle connection costs {per / 1024:.1f} KiB <= {BOUND >> 10} KiB")
        exercise(socks, 2)
        used = rss_bytes(d.pid)
        per_used = (used - before) / CONNS
        print(f"after {DEPTH} writes and reads in flight on each: VmRSS {used >> 10} KiB: "
              f"{per_used / 1024:.1f} KiB each")
        check(per_used <= BOUND, f"a connection idle again costs {per_used / 1024:.1f} KiB <= {BOUND >> 10} KiB")
        for s in socks + warm:
            s.close()
        check(d.alive(), "the daemon is still running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
