"""--fdstore-handover (systemd's planned restart): a SIGTERM starts parking
the connections for the fd store while a write that takes 3 s is in
flight; a second SIGTERM 0.3 s later stops the daemon without waiting for
that request, as a second SIGTERM does in an ordinary shutdown. Checked:
the daemon says so ("SIGTERM again"), logs the shutdown once, never says it
serves on, stores nothing in the fd store and exits 0. Before, the second
SIGTERM began an ordinary shutdown inside the hand-over (logged twice, after
"hand-over failed: ...; serving on") and a third was needed to force it.
"""
import os
import signal
import subprocess
import time

import nbd

from nbdsched_test.daemon import nbdsched_binary
from nbdsched_test.process import wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks
from test_handover import FdStore

CONFIG = """
listen: [{{unix: {dir}/nbd.sock}}]
devices:
  - {{name: d0, backend: file, path: {dir}/d0.img, size: 16MiB, faults: [{{op: write, delay: 3s}}]}}
exports: [{{name: e0, device: d0}}]
"""


def main():
    checks = Checks()
    tmp = TempDir("fdstore-sigterm")
    proc = None
    try:
        with open(tmp.file("d0.img"), "wb") as f:
            f.truncate(16 << 20)
        with open(tmp.file("c.yaml"), "w") as f:
            f.write(CONFIG.format(dir=tmp.path))
        store = FdStore(tmp.file("notify"))
        log_path = tmp.file("daemon.log")
        proc = subprocess.Popen([nbdsched_binary(), "--config", tmp.file("c.yaml"), "--fdstore-handover"],
                                env=dict(os.environ, NOTIFY_SOCKET=store.path), stdout=open(log_path, "w"),
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        checks.check("daemon up", wait_for(lambda: os.path.exists(tmp.file("nbd.sock")), 10))
        h = nbd.NBD()
        h.connect_uri(f"nbd+unix:///e0?socket={tmp.file('nbd.sock')}")
        h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"w" * 4096)), 0)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        checks.check("the first SIGTERM starts the fd store's hand-over",
                     wait_for(lambda: "hand-over: parking" in open(log_path).read(), 5))
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(30)
        store.drain()
        log = open(log_path, errors="replace").read()
        checks.check("exit 0", status == 0, f"status {status}")
        checks.check("the second SIGTERM forces the stop", "SIGTERM again: stopping without waiting" in log)
        checks.check("the shutdown is logged once", log.count("SIGTERM: shutting down") == 1,
                     f"{log.count('SIGTERM: shutting down')} times")
        checks.check("no 'serving on' from a daemon that stops", "serving on" not in log)
        checks.check("nothing left in the fd store", not store.fds, f"{sorted(store.fds)}")
        if checks.failed:
            print(log[-3000:])
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        tmp.remove()
    checks.finish()


if __name__ == "__main__":
    main()
