"""A TLS session ends the way the NBD spec asks: after NBD_CMD_DISC (and
after NBD_OPT_ABORT) the server sends TLS close_notify before it closes the
connection, so a client can tell a clean end from a cut one. Raw NBD over
Python's ssl module with X.509 certificates: a connection cut without
close_notify raises SSLEOFError (suppress_ragged_eofs=False), a clean one
reads b"" and unwrap() completes."""
import os
import signal
import socket
import ssl
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keys   # noqa: E402

from nbdsched_test.daemon import Daemon   # noqa: E402
from nbdsched_test.process import wait_for   # noqa: E402
from nbdsched_test.raw_nbd import (CLIENT_FLAGS, CMD_DISC, CMD_WRITE, GREETING_BYTES, OPT_ABORT, OPT_GO,   # noqa: E402
                                   OPT_STARTTLS, OPTION_REPLY_MAGIC, REP_ACK, REP_INFO, SIMPLE_REPLY_MAGIC,
                                   exactly, send_option, send_request)
from nbdsched_test.tempdir import TempDir   # noqa: E402
from nbdsched_test.verdict import Checks   # noqa: E402



def option(s, opt, data=b""):
    """Sends an option and returns the type of its last reply (after INFOs)."""
    send_option(s, opt, data)
    while True:
        magic, _, kind, length = struct.unpack(">QIII", exactly(s, 20))
        assert magic == OPTION_REPLY_MAGIC, hex(magic)
        exactly(s, length)
        if kind != REP_INFO:
            return kind


def tls_client(path, ca_cert):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(path)
    exactly(s, GREETING_BYTES)
    s.sendall(struct.pack(">I", CLIENT_FLAGS))
    assert option(s, OPT_STARTTLS) == REP_ACK
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(ca_cert)
    return ctx.wrap_socket(s, server_hostname="localhost", suppress_ragged_eofs=False)


def how_it_ends(s):
    """'close_notify' when the server ended TLS cleanly, else what happened."""
    try:
        rest = s.recv(100)
        if rest:
            return f"unexpected bytes {rest[:16].hex()}"
        s.unwrap()   # our close_notify back
        return "close_notify"
    except ssl.SSLEOFError as e:
        return f"cut without close_notify ({e})"
    except (OSError, ssl.SSLError) as e:
        return f"{type(e).__name__}: {e}"


def main():
    keys.need_tools()
    tmp = TempDir("tlsend")
    ca = keys.Ca(os.path.join(tmp.path, "ca"), "nbdsched test CA")
    pki = ca.issue(os.path.join(tmp.path, "pki"), "server", "localhost", server=True)
    sock = tmp.file("tls.sock")
    config = f"""
tls: {{certificates: {pki}}}
listen:
  - unix: {sock}
    tls: require
devices:
  - {{name: d0, backend: ram, size: 4MiB}}
exports:
  - {{name: default, device: d0}}
"""
    checks = Checks()
    d = Daemon(config, "tlsend", workdir=tmp.path)
    wait_for(lambda: os.path.exists(sock), 10)
    try:
        s = tls_client(sock, ca.cert)
        name = b"default"
        checks.check("GO over TLS", option(s, OPT_GO, struct.pack(">I", len(name)) + name + b"\0\0") == REP_ACK)
        send_request(s, CMD_WRITE, 1, 0, 512, b"x" * 512)
        magic, error, cookie = struct.unpack(">IIQ", exactly(s, 16))
        checks.check("a WRITE over TLS is answered", (magic, error, cookie) == (SIMPLE_REPLY_MAGIC, 0, 1))
        send_request(s, CMD_DISC, 2, 0, 0)
        end = how_it_ends(s)
        checks.check("after NBD_CMD_DISC the server ends TLS with close_notify", end == "close_notify", end)

        s = tls_client(sock, ca.cert)
        checks.check("ABORT is acknowledged", option(s, OPT_ABORT) == REP_ACK)
        end = how_it_ends(s)
        checks.check("after NBD_OPT_ABORT the server ends TLS with close_notify", end == "close_notify", end)

        # A client that never answers the server's close_notify does not keep
        # its connection: the server waits for the answer only briefly (this
        # guards the wait; a server that sends no close_notify passes it too).
        s = tls_client(sock, ca.cert)
        checks.check("ABORT again", option(s, OPT_ABORT) == REP_ACK)
        s.recv(100)   # the server's close_notify (the checks above tell it from a cut)
        raw = socket.socket(fileno=os.dup(s.fileno()))
        raw.settimeout(10)
        start = time.monotonic()
        try:
            rest = raw.recv(100)
        except OSError as e:
            rest = repr(e)
        waited = time.monotonic() - start
        checks.check("a client that does not answer it is disconnected, not kept", rest == b"" and waited < 5,
                     f"{rest!r} after {waited:.2f} s")
        raw.close()

        # A server stop ends an idle TLS session with close_notify too, and
        # does not wait for the client to answer it for long.
        s = tls_client(sock, ca.cert)
        checks.check("GO for the stop", option(s, OPT_GO, struct.pack(">I", len(name)) + name + b"\0\0") == REP_ACK)
        d.send(signal.SIGTERM)
        end = how_it_ends(s)
        checks.check("SIGTERM: the idle TLS session ends with close_notify", end == "close_notify", end)
        status = d.stop()
        checks.check("SIGTERM with an idle TLS client: the daemon exits 0", status == 0, f"status {status}")
    finally:
        checks.clean_up(d, tmp)
    checks.finish()


if __name__ == "__main__":
    main()
