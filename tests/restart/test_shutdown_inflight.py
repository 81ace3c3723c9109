"""Graceful stop (SIGTERM) with requests in flight: a libnbd client keeps
submitting 4 KiB writes (32 in flight) on a file device whose writes take
30 ms, over the unix socket and over TCP; then 1 MiB writes (8 in flight,
300 ms each) so that the signal comes while payloads are being received.
Checked: every write the daemon performed (its data is in the file) got
its reply on the client, every acknowledged write is in the file, the
daemon exits 0. Before, the daemon shut the socket's receiving half: on a
unix socket the client's next send failed with EPIPE and it dropped the
replies still on their way; a payload cut by it made the daemon close
without writing the replies it owed; over TCP the close with unread bytes
reset the connection under the last replies.
"""
import os
import signal
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

SIZE = 64 << 20

CONFIG = """
limits: {{drain_timeout: 10s, io_threads: 8}}
devices:
  - {{name: d0, backend: file, path: {{dir}}/d0.img, size: 64MiB, faults: [{{op: write, delay: {delay}}}]}}
exports: [{{name: e0, device: d0}}]
"""


def run(checks, tmp, name, transport, block, depth, delay, keep_submitting):
    path = os.path.join(tmp.path, "d0.img")
    with open(path, "wb") as f:
        f.truncate(SIZE)
    daemon = Daemon(CONFIG.format(delay=delay), tag=name, workdir=tmp.path, tcp=transport == "tcp")
    try:
        h = nbd.NBD()
        h.connect_uri(daemon.uri("e0", transport))
        acked, failed = {}, {}   # seq -> offset

        def completion(seq, off):
            def done(err):
                (acked if err.value == 0 else failed)[seq] = off
                return 1
            return done

        seq, signalled, start = 0, None, time.monotonic()
        try:
            while True:
                submitting = signalled is None or (keep_submitting and time.monotonic() - signalled < 2)
                while submitting and h.aio_in_flight() < depth:
                    seq += 1
                    off = (seq * 7919) % (SIZE // block) * block
                    data = seq.to_bytes(8, "little") * (block // 8)
                    h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data)), off, completion=completion(seq, off))
                if signalled is None and time.monotonic() - start > 1.0:
                    daemon.send(signal.SIGTERM)
                    signalled = time.monotonic()
                if signalled is not None and h.aio_in_flight() == 0:
                    break
                h.poll(1000)
                if signalled is not None and time.monotonic() - signalled > 30:
                    break
        except nbd.Error as e:
            print(f"{name}: client: {e}")
        status = daemon.proc.wait(30)
        with open(path, "rb") as f:
            image = f.read()

        def holds(seq, off):
            return image[off:off + block] == seq.to_bytes(8, "little") * (block // 8)

        # A later write to the same block may overwrite an earlier one: a
        # failed write counts as performed only when its own data is there.
        performed_unanswered = [s for s, o in failed.items() if holds(s, o)]
        overwritten = {o for s, o in acked.items() for t, p in list(acked.items()) + list(failed.items())
                       if p == o and t > s}
        lost = [s for s, o in acked.items() if o not in overwritten and not holds(s, o)]
        print(f"{name}: {seq} sent, {len(acked)} acknowledged, {len(failed)} failed")
        checks.check(f"{name}: daemon exits 0", status == 0, f"status {status}")
        checks.check(f"{name}: every write the daemon performed was answered", not performed_unanswered,
                     f"{len(performed_unanswered)} performed writes failed on the client")
        checks.check(f"{name}: every acknowledged write is in the file", not lost, f"{len(lost)} lost")
        checks.check(f"{name}: requests were in flight at the signal", len(acked) > depth, f"{len(acked)} acked")
        if performed_unanswered or lost:
            print(daemon.log_tail())
    finally:
        daemon.stop()


def main():
    checks = Checks()
    tmp = TempDir("shutdown-inflight")
    try:
        run(checks, tmp, "unix", "unix", 4096, 32, "30ms", True)
        run(checks, tmp, "tcp", "tcp", 4096, 32, "30ms", True)
        run(checks, tmp, "payload", "unix", 1 << 20, 8, "300ms", False)
    finally:
        tmp.remove()
    checks.finish()


if __name__ == "__main__":
    main()
