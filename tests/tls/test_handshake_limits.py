"""Handshake limits with raw sockets: a client that sends nothing, one that
sends option after option, and one that stalls in the middle of its TLS
handshake are each dropped (limits.handshake_timeout, here 0.5 s, and
limits.max_handshake_options), with a log line, and free their connection
slot: max_connections is 3, and a real client gets in after three stalled
ones were dropped. A slot freed by a drop is free by the time the client
sees the drop: with max_handshakes 1 each newcomer drops the handshake
before it, whose client reconnects at once, and none is refused.

The times are taken from before each connect: the daemon starts its
handshake timer at accept, after that, and never fires it early, so each
drop comes at 0.5 s or later however loaded the machine is."""
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keys   # noqa: E402

from nbdsched_test.daemon import Daemon   # noqa: E402
from nbdsched_test.process import run_bounded, wait_for   # noqa: E402
from nbdsched_test.raw_nbd import (CLIENT_FLAGS, GREETING_BYTES, OPT_STARTTLS, OPT_STRUCTURED_REPLY,   # noqa: E402
                                   connect_export, exactly, send_option)
from nbdsched_test.tempdir import TempDir   # noqa: E402
from nbdsched_test.verdict import Checks   # noqa: E402

MAX_OPTIONS = 16
OPTION_REPLY_BYTES = 20   # magic, option, type, length: an ACK has no data
# Drops and reconnections in a row: a daemon that counted a dropped
# handshake until it had let go of it refused about one in two.
REUSES = 20


def connect(path, flags=True):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    exactly(s, GREETING_BYTES)
    if flags:
        s.sendall(struct.pack(">I", CLIENT_FLAGS))
    return s


def read_until_closed(s):
    """What the server sends on `s` until it closes it."""
    got = bytearray()
    try:
        while chunk := s.recv(4096):
            got += chunk
    except OSError:
        pass
    return bytes(got)


def closed_after(s, start):
    """Seconds from `start` until the server closes `s` (reading and dropping replies)."""
    read_until_closed(s)
    return time.monotonic() - start


def flood(s):
    """Options until the server stops reading them; the replies that came before it closed `s`."""
    for _ in range(40):
        try:
            send_option(s, OPT_STRUCTURED_REPLY)
        except OSError:
            break
    return len(read_until_closed(s)) // OPTION_REPLY_BYTES


def main():
    keys.need_tools()
    tmp = TempDir("hslimits")
    psk = keys.psk_dir(tmp.path, "psk", "alice")
    sock, tls_sock = tmp.file("plain.sock"), tmp.file("tls.sock")
    config = f"""
tls: {{psk_file: {psk}}}
listen:
  - unix: {sock}
  - unix: {tls_sock}
    tls: require
limits:
  handshake_timeout: 500ms
  max_handshake_options: {MAX_OPTIONS}
  max_connections: 3
devices:
  - {{name: d0, backend: ram, size: 4MiB}}
exports:
  - {{name: default, device: d0}}
"""
    checks = Checks()
    d = Daemon(config, "hslimits", workdir=tmp.path)
    wait_for(lambda: os.path.exists(sock) and os.path.exists(tls_sock), 10)   # bound after the control socket
    try:
        start = time.monotonic()
        silent = [connect(sock, flags=False) for _ in range(3)]
        t = [closed_after(s, start) for s in silent]
        checks.check("silent clients dropped after ~0.5 s", all(0.5 <= x < 3 for x in t), f"{t}")
        checks.check("log says why", d.wait_log("handshake not finished within 500ms"))
        rc, out = run_bounded(["nbdinfo", "--size", f"nbd+unix:///?socket={sock}"], timeout=10)
        checks.check("their connection slots are free again", rc == 0 and out.strip() == str(4 << 20), out)

        # Cut off by the option limit, not the timeout: the replies stop at it.
        answered = flood(connect(sock))
        checks.check("an option flood is cut off at max_handshake_options", answered == MAX_OPTIONS,
                     f"{answered} options answered")
        checks.check("log says too many options", d.wait_log("too many options"))

        start = time.monotonic()
        s = connect(tls_sock)
        send_option(s, OPT_STARTTLS)
        reply = s.recv(20)
        checks.check("STARTTLS is acknowledged", len(reply) == 20 and struct.unpack(">QIII", reply)[2] == 1,
                     reply.hex())
        s.sendall(b"\x16\x03\x01")   # the first bytes of a ClientHello, then nothing
        t = closed_after(s, start)
        checks.check("a client stalled in its TLS handshake is dropped after ~0.5 s", 0.5 <= t < 3, f"{t:.2f} s")
    finally:
        checks.clean_up(d, tmp)
    slot_reuse(checks)
    checks.finish()


def slot_reuse(checks):
    """max_handshakes 1: each new connection closes the one before it in
    the handshake. With one slot of max_connections 3 held in
    transmission, each newcomer finds the other two taken, one by the
    handshake just closed; the client of that one reconnects as soon as it
    sees the close, and must get in, time after time."""
    tmp = TempDir("hsreuse")
    sock = tmp.file("plain.sock")
    config = f"""
listen:
  - unix: {sock}
limits:
  max_connections: 3
  max_handshakes: 1
devices:
  - {{name: d0, backend: ram, size: 4MiB}}
exports:
  - {{name: default, device: d0}}
"""
    d = Daemon(config, "hsreuse", workdir=tmp.path)
    wait_for(lambda: os.path.exists(sock), 10)
    try:
        held = connect_export(sock)
        previous = connect(sock)
        refused = 0
        for _ in range(REUSES):
            try:
                s = connect(sock)
            except EOFError:
                refused += 1
                continue
            read_until_closed(previous)   # closed for `s`: at most one handshake
            previous = s
        checks.check("a slot freed by a dropped handshake is free once its client sees the drop", refused == 0,
                     f"refused {refused} of {REUSES} times")
        dropped = d.log().count("max_handshakes (1)")
        checks.check("each newcomer dropped the handshake before it", dropped == REUSES - refused,
                     f"{dropped} dropped")
        held.close()
    finally:
        checks.clean_up(d, tmp)


if __name__ == "__main__":
    main()
