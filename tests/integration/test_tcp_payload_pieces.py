"""Large WRITE payloads over TCP that come in pieces. The daemon waits for
the rest of a large payload with a low-water mark on the socket (epoll wakes
it once the rest is in, not at each burst of segments); it must lower the
mark again before the next request, or a 28-byte header would never wake
it, and lower it at the payload's stall step (100 ms), or a client that
sends slowly would show no progress and be closed by limits.stall_timeout.

One daemon (stall_timeout 2s) on TCP:
- 1 MiB and 3 MiB WRITEs (the second over the mark's 1 MiB cap) sent in
  64 KiB pieces 20 ms apart, each followed by a 4 KiB READ of its data on
  the same connection: every reply comes within 5 s and the data reads back;
- a 1 MiB WRITE trickled over 6.4 s (32 pieces 200 ms apart: three times the
  stall timeout, never 2 s without a byte: a client process starved for
  less than 1.8 s on a loaded machine still passes) is answered, the
  connection stays open and its data reads back;
- a client that sends half of a 1 MiB payload and stops is closed after the
  stall timeout (the mark does not hide a real stall)."""
import socket
import struct
import time

from nbdsched_test.daemon import Daemon
from nbdsched_test.raw_nbd import CMD_READ, CMD_WRITE, REQUEST_MAGIC, connect_export, read_reply
from nbdsched_test.verdict import Checks

MIB = 1 << 20
CONFIG = """devices:
  - {name: d0, size: 64MiB}
exports:
  - {name: default, device: d0}
limits:
  stall_timeout: 2s
"""


def pattern(seed, n):
    return bytes((seed + i // 4096) & 0xFF for i in range(n))


def send_in_pieces(s, cookie, offset, data, piece, pause):
    s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, cookie, offset, len(data)))
    for at in range(0, len(data), piece):
        s.sendall(data[at:at + piece])
        time.sleep(pause)


def read_back(s, cookie, offset, length):
    s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, cookie, offset, length))
    return read_reply(s, cookie, length)


def main():
    checks = Checks()
    with Daemon(CONFIG, "tcp-pieces", tcp=True) as d:
        where = ("127.0.0.1", d.tcp_port)
        s = connect_export(where)
        s.settimeout(5)
        for cookie, (offset, size) in enumerate([(0, MIB), (4 * MIB, 3 * MIB)], start=1):
            data = pattern(cookie, size)
            send_in_pieces(s, cookie, offset, data, 64 << 10, 0.02)
            try:
                error, _ = read_reply(s, cookie)
                rerror, got = read_back(s, 100 + cookie, offset + size - 4096, 4096)
                checks.check(f"a {size >> 20} MiB WRITE in 64 KiB pieces is answered, and the READ after it too",
                             error == 0 and rerror == 0, f"errors {error}, {rerror}")
                checks.check("its last 4 KiB read back", got == data[-4096:])
            except socket.timeout:
                checks.check(f"a {size >> 20} MiB WRITE in pieces and the READ after it are answered within 5 s",
                             False, "no reply: the next header did not wake the daemon")
        data = pattern(7, MIB)
        start = time.monotonic()
        try:
            send_in_pieces(s, 7, 8 * MIB, data, MIB // 32, 0.2)
            error, _ = read_reply(s, 7)
            took = time.monotonic() - start
            rerror, got = read_back(s, 8, 8 * MIB, MIB)
            checks.check("a 1 MiB WRITE trickled over three stall timeouts is answered", error == 0,
                         f"error {error} after {took:.1f} s")
            checks.check("and reads back whole", rerror == 0 and got == data)
        except (socket.timeout, ConnectionError, AssertionError) as e:
            checks.check("a 1 MiB WRITE trickled over three stall timeouts is answered", False,
                         f"{type(e).__name__}: {e}")
        s.close()

        stalled = connect_export(where)
        stalled.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, 9, 0, MIB) + b"s" * (MIB // 2))
        stalled.settimeout(10)
        start = time.monotonic()
        try:
            closed = stalled.recv(1) == b""
        except ConnectionError:
            closed = True
        except socket.timeout:
            closed = False
        took = time.monotonic() - start
        checks.check("a client that stops half-way through a 1 MiB payload is closed after the stall timeout",
                     closed and took < 8, f"closed {closed} after {took:.1f} s")
        stalled.close()
    checks.finish()


if __name__ == "__main__":
    main()
