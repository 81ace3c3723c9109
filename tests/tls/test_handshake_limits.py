"""Handshake limits with raw sockets: a client that sends nothing, one that
sends option after option, and one that stalls in the middle of its TLS
handshake are each dropped (limits.handshake_timeout, here 0.5 s, and
limits.max_handshake_options), with a log line, and free their connection
slot: max_connections is 3, and a real client gets in after three stalled
ones were dropped."""
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
                                   exactly, send_option)
from nbdsched_test.tempdir import TempDir   # noqa: E402
from nbdsched_test.verdict import Checks   # noqa: E402



def connect(path, flags=True):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    exactly(s, GREETING_BYTES)
    if flags:
        s.sendall(struct.pack(">I", CLIENT_FLAGS))
    return s


def closed_after(s, start=None):
    """Seconds from `start` (default now) until the server closes `s`
    (reading and dropping replies)."""
    start = start or time.monotonic()
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass
    return time.monotonic() - start


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
  max_handshake_options: 16
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
        checks.check("silent clients dropped after ~0.5 s", all(0.3 < x < 3 for x in t), f"{t}")
        checks.check("log says why", d.wait_log("handshake not finished within 500ms"))
        rc, out = run_bounded(["nbdinfo", "--size", f"nbd+unix:///?socket={sock}"], timeout=10)
        checks.check("their connection slots are free again", rc == 0 and out.strip() == str(4 << 20), out)

        s = connect(sock)
        for _ in range(40):
            try:
                send_option(s, OPT_STRUCTURED_REPLY)
            except OSError:
                break
        t = closed_after(s)
        checks.check("an option flood is cut off at once", t < 0.4, f"{t:.2f} s")
        checks.check("log says too many options", d.wait_log("too many options"))

        s = connect(tls_sock)
        send_option(s, OPT_STARTTLS)
        reply = s.recv(20)
        checks.check("STARTTLS is acknowledged", len(reply) == 20 and struct.unpack(">QIII", reply)[2] == 1,
                     reply.hex())
        s.sendall(b"\x16\x03\x01")   # the first bytes of a ClientHello, then nothing
        t = closed_after(s)
        checks.check("a client stalled in its TLS handshake is dropped after ~0.5 s", 0.3 < t < 3, f"{t:.2f} s")
    finally:
        checks.clean_up(d, tmp)
    checks.finish()


if __name__ == "__main__":
    main()
