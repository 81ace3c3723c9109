"""A planned restart (--takeover) with 200 connections whose read buffers
are full: each raw NBD client pipelines 60 WRITEs of 4 KiB on a device
whose writes take 100 ms, one request of a connection in flight at a time
(max_inflight_per_connection: 1), so each parked connection carries about
240 KiB read but not parsed. Checked: the old daemon exits 0, the new one
adopts all 200 connections, and every WRITE of every client is answered
without error. Before, the state (unread bytes as hex in the JSON, 80+ MB
here) was over the frame's fixed 64 MiB limit: the new process exited 1
with "malformed frame" and the restart could not happen under such load.
"""
import os
import re
import socket
import struct
import threading
import time

from nbdsched_test.handover import start_generation
from nbdsched_test.process import stop_all, wait_for
from nbdsched_test.raw_nbd import (CLIENT_FLAGS, CMD_WRITE, GREETING_BYTES, OPT_EXPORT_NAME, REQUEST_MAGIC,
                                   SIMPLE_REPLY_MAGIC, exactly, send_option)
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

CLIENTS = 200
WRITES = 60
BLOCK = 4096

CONFIG = """
limits: {{max_inflight_per_connection: 1, io_threads: 64}}
listen: [{{unix: {dir}/nbd.sock}}]
control: {dir}/{tag}-ctl.sock
devices:
  - {{name: d0, backend: file, path: {dir}/d0.img, size: 64MiB, faults: [{{op: write, delay: 100ms}}]}}
exports: [{{name: e0, device: d0}}]
"""


def connect(path):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    exactly(s, GREETING_BYTES)
    s.sendall(struct.pack(">I", CLIENT_FLAGS))
    send_option(s, OPT_EXPORT_NAME, b"e0")
    exactly(s, 10)   # size and transmission flags
    return s


class Client:
    def __init__(self, sock, index):
        self.sock = sock
        self.answered = 0
        self.errors = 0
        self.failure = None
        burst = b"".join(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, i, ((index * 64 + i) % 16384) * BLOCK,
                                     BLOCK) + bytes([i % 256]) * BLOCK for i in range(WRITES))
        threading.Thread(target=self.read_replies, daemon=True).start()
        threading.Thread(target=sock.sendall, args=(burst,), daemon=True).start()

    def read_replies(self):
        try:
            while self.answered < WRITES:
                magic, error, _ = struct.unpack(">IIQ", exactly(self.sock, 16))
                if magic != SIMPLE_REPLY_MAGIC:
                    raise ValueError(f"reply magic 0x{magic:x}")
                self.answered += 1
                self.errors += error != 0
        except (OSError, EOFError, ValueError) as e:
            self.failure = e


def start(tmp, tag, args, procs):
    return start_generation(tmp, tag, CONFIG.format(dir=tmp.path, tag=tag), args, procs)


def main():
    checks = Checks()
    tmp = TempDir("many-unread")
    procs = []
    try:
        with open(tmp.file("d0.img"), "wb") as f:
            f.truncate(64 << 20)
        handover = tmp.file("handover.sock")
        old = start(tmp, "old", ["--handover-socket", handover], procs)
        checks.check("old daemon up", wait_for(lambda: os.path.exists(handover)
                                               and os.path.exists(tmp.file("old-ctl.sock")), 10))
        clients = [Client(connect(tmp.file("nbd.sock")), i) for i in range(CLIENTS)]
        time.sleep(1.5)   # the bursts sit in the read buffers
        new = start(tmp, "new", ["--takeover", handover], procs)
        wait_for(lambda: old.poll() is not None or new.poll() is not None, 60)
        time.sleep(0.5)
        old_status = old.poll() if old.poll() is not None else "still running"
        checks.check("the old daemon exits 0", old_status == 0, f"{old_status}")
        new_log = open(tmp.file("new.log"), errors="replace").read()
        unread = [int(n) for n in re.findall(r"handed over, (\d+) unread", new_log)]
        checks.check(f"the new daemon adopts all {CLIENTS} connections", len(unread) == CLIENTS,
                     f"{len(unread)} adopted, new daemon {'running' if new.poll() is None else f'exit {new.poll()}'}")
        checks.check("their unread bytes, as hex, are more than 64 MiB", 2 * sum(unread) > 64 << 20,
                     f"{sum(unread)} bytes")
        checks.check("every WRITE is answered", wait_for(lambda: all(c.answered == WRITES or c.failure
                                                                     for c in clients), 60))
        failed = [c for c in clients if c.failure or c.errors or c.answered != WRITES]
        checks.check("no client saw an error or a lost reply", not failed,
                     f"{len(failed)} clients, e.g. {failed[0].failure if failed else ''}")
        if checks.failed:
            print(new_log[-2000:])
            print(open(tmp.file("old.log"), errors="replace").read()[-2000:])
    finally:
        stop_all(procs)
        tmp.remove()
    checks.finish()


if __name__ == "__main__":
    main()
