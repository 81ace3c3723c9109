"""A planned restart (--takeover) while clients are still in the handshake:
the NBD spec's way for a server that will not go on negotiating is to answer
the client's next option NBD_REP_ERR_SHUTDOWN, then close (doc/proto.md).
Three clients of the old daemon: one had LIST answered and sends its next
option (LIST) once the hand-over began; one sent the header and part of the
data of a GO before it and sends the rest then; one greeted and stays
silent. The first two get NBD_REP_ERR_SHUTDOWN to that option, then EOF;
the silent one is closed within a few seconds, without holding the
hand-over up to its handshake_timeout. The old daemon exits 0, and a client
connecting again finishes its handshake on the new one. Before, the old
daemon closed all three at once, without a reply."""
import os
import socket
import struct
import time

from nbdsched_test.handover import Generations
from nbdsched_test.process import wait_for
from nbdsched_test.raw_nbd import (CLIENT_FLAGS, GREETING_BYTES, IHAVEOPT, NBDMAGIC, OPT_GO, OPTION_REPLY_MAGIC,
                                   REP_ACK, REP_INFO, exactly, send_option)
from nbdsched_test.verdict import Checks

OPT_LIST = 3
REP_SERVER = 2
REP_ERR_SHUTDOWN = (1 << 31) + 7
CONFIG = """
listen: [{{unix: {dir}/nbd.sock}}]
devices: [{{name: d0, backend: file, path: {dir}/d0.img, size: 16MiB}}]
exports: [{{name: e0, device: d0}}]
limits: {{handshake_timeout: 60s}}
"""


def greeted(path):
    """A Unix socket at `path`, greeted and past the client flags."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    greeting = exactly(s, GREETING_BYTES)
    if greeting[:8] != NBDMAGIC:
        raise AssertionError(f"bad greeting {greeting!r}")
    s.sendall(struct.pack(">I", CLIENT_FLAGS))
    return s


def option_reply(s):
    """(option, reply type, data) of one option reply."""
    magic, option, kind, length = struct.unpack(">QIII", exactly(s, 20))
    if magic != OPTION_REPLY_MAGIC:
        raise AssertionError(f"bad option reply magic {magic:#x}")
    return option, kind, exactly(s, length)


def final_reply(s):
    """The last reply to an option (after LIST's NBD_REP_SERVERs, GO's NBD_REP_INFOs)."""
    while True:
        option, kind, _ = option_reply(s)
        if kind not in (REP_SERVER, REP_INFO):
            return option, kind


def closed_by_server(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def answered_shutdown(s, option, send):
    """`send()`, then True when `option` is answered NBD_REP_ERR_SHUTDOWN and
    the connection then ends; a message of what came otherwise."""
    try:
        send()
        got = final_reply(s)
    except (OSError, EOFError) as e:
        return False, f"{type(e).__name__}: {e}"
    if got != (option, REP_ERR_SHUTDOWN):
        return False, f"reply {got}"
    closed = closed_by_server(s)
    return closed, "" if closed else "no EOF after the reply"


def go_data(name):
    return struct.pack(">I", len(name)) + name + struct.pack(">H", 0)


GO = struct.pack(">QII", IHAVEOPT, OPT_GO, len(go_data(b"e0"))) + go_data(b"e0")


def old_with_handshakes(g, checks, config=CONFIG):
    """The old daemon of `g` (`config`; hand-over socket g.tmp's
    handover.sock) and its three clients in the handshake: (process,
    config, between, midway, silent). `between` had LIST answered, `midway`
    sent 19 bytes of GO."""
    sock, handover = g.tmp.file("nbd.sock"), g.tmp.file("handover.sock")
    with open(g.tmp.file("d0.img"), "wb") as f:
        f.truncate(16 << 20)
    config = config.format(dir=g.tmp.path)
    old = g.start("old", config, ["--handover-socket", handover])
    checks.check("old daemon up", wait_for(lambda: os.path.exists(handover) and "nbdsched: ready" in g.log("old"), 10))
    between = greeted(sock)
    send_option(between, OPT_LIST)
    checks.check("LIST is answered before the hand-over", final_reply(between) == (OPT_LIST, REP_ACK))
    midway = greeted(sock)
    midway.sendall(GO[:19])   # the header and 3 bytes of the data
    silent = greeted(sock)
    time.sleep(0.2)   # the daemon has read what they sent
    return old, config, between, midway, silent


def main():
    checks = Checks()
    with Generations("handover-handshake") as g:
        sock, handover = g.tmp.file("nbd.sock"), g.tmp.file("handover.sock")
        old, config, between, midway, silent = old_with_handshakes(g, checks)

        start = time.monotonic()
        new = g.start("new", config, ["--takeover", handover])
        checks.check("the hand-over begins", wait_for(lambda: "hand-over: parking" in g.log("old"), 20),
                     g.log("old")[-1500:])
        time.sleep(0.1)   # the line comes just before the connections are told
        ok, why = answered_shutdown(between, OPT_LIST, lambda: send_option(between, OPT_LIST))
        checks.check("the next option of a client between two is answered NBD_REP_ERR_SHUTDOWN, then EOF", ok, why)
        ok, why = answered_shutdown(midway, OPT_GO, lambda: midway.sendall(GO[19:]))
        checks.check("an option half sent is answered NBD_REP_ERR_SHUTDOWN once whole, then EOF", ok, why)
        checks.check("a silent client is closed", closed_by_server(silent))
        checks.check("the old daemon exits 0 after the hand-over", old.wait(20) == 0)
        elapsed = time.monotonic() - start
        checks.check("the silent client held the hand-over a few seconds at most", elapsed < 8, f"{elapsed:.1f} s")
        checks.check("new daemon ready", wait_for(lambda: "nbdsched: ready" in g.log("new"), 10))
        again = greeted(sock)
        again.sendall(GO)
        checks.check("a client connecting again opens the export on the new daemon",
                     final_reply(again) == (OPT_GO, REP_ACK))
        for s in (between, midway, silent, again):
            s.close()
        checks.check("the new daemon is still running", new.poll() is None)
        g.print_logs_if_failed(checks, "old", "new")
    checks.finish()


if __name__ == "__main__":
    main()
