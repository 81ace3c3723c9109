"""systemd's planned restart (--fdstore-handover, the shipped unit's) with
the shipped configuration (config/nbdsched.example.yaml, installed as
/etc/nbdsched/nbdsched.yaml), the test playing systemd's part: its paths
under /var/lib/nbdsched and /run/nbdsched are moved into a temporary
directory and it listens on one unix socket (--listen-unix), otherwise it
is the file as shipped. Checked: its device files are created on the first
start; on SIGTERM a client on each of its two devices is parked and stored
in the fd store (no refusal, exit 0); the next start adopts both and each
reads back what it wrote, without reconnecting.
Then a RAM device beside a file device: SIGTERM closes every connection,
the file device's too, and the warning names the RAM device and what to do
under systemd (make it a file device, or remove it), not `--takeover
--force`, which a systemd restart cannot pass.
"""
import os
import signal
import subprocess

import nbd

from nbdsched_test.daemon import nbdsched_binary
from nbdsched_test.process import stop_all, wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks
from test_handover import FdStore

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "config", "nbdsched.example.yaml")

RAM_BESIDE_FILE = """
listen: [{{unix: {dir}/ram.sock}}]
devices:
  - {{name: scratch, backend: ram, size: 16MiB}}
  - {{name: disk, backend: file, path: {dir}/beside-ram.img, size: 16MiB}}
exports:
  - {{name: scratch, device: scratch}}
  - {{name: disk, device: disk}}
"""


def connect(sock, export):
    h = nbd.NBD()
    h.connect_uri(f"nbd+unix:///{export}?socket={sock}")
    return h


def start(argv, store, log_path):
    return subprocess.Popen(argv, env=dict(os.environ, NOTIFY_SOCKET=store.path), stdout=open(log_path, "w"),
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def shipped_config(checks, tmp, procs):
    with open(EXAMPLE) as f:
        text = f.read()
    checks.check("the shipped config keeps its files under /var/lib/nbdsched and sockets under /run/nbdsched",
                 "/var/lib/nbdsched/" in text and "/run/nbdsched/" in text)
    with open(tmp.file("nbdsched.yaml"), "w") as f:
        f.write(text.replace("/var/lib/nbdsched/", tmp.path + "/").replace("/run/nbdsched/", tmp.path + "/"))
    sock = tmp.file("nbd.sock")
    argv = [nbdsched_binary(), "--config", tmp.file("nbdsched.yaml"), "--fdstore-handover", "--listen-unix", sock]
    store = FdStore(tmp.file("notify"))
    first = start(argv, store, tmp.file("first.log"))
    procs.append(first)
    if not checks.check("the daemon starts with the shipped config", wait_for(lambda: os.path.exists(sock), 15)):
        print(open(tmp.file("first.log"), errors="replace").read()[-3000:])
        return
    checks.check("its device files are created", os.path.exists(tmp.file("d0.img")) and
                 os.path.exists(tmp.file("disk.img")))
    clients = {export: connect(sock, export) for export in ("default", "tenant-a")}
    for i, (export, h) in enumerate(clients.items()):
        h.pwrite(bytes([65 + i]) * 4096, 8192)
    first.send_signal(signal.SIGTERM)
    status = first.wait(30)
    store.drain()
    log = open(tmp.file("first.log"), errors="replace").read()
    checks.check("SIGTERM exits 0", status == 0, f"status {status}")
    checks.check("no refusal of the hand-over", "no hand-over through the fd store" not in log,
                 next((line for line in log.splitlines() if "no hand-over" in line), ""))
    checks.check("state, listener and both connections in the fd store",
                 "nbdsched-state" in store.fds and len(store.fds) == 4, f"{sorted(store.fds)}")
    second = store.start(argv, open(tmp.file("second.log"), "w"))
    procs.append(second)
    checks.check("the next start adopts both connections",
                 wait_for(lambda: "adopted 1 listener(s) and 2 connection(s)" in
                          open(tmp.file("second.log"), errors="replace").read(), 15))
    for i, (export, h) in enumerate(clients.items()):
        try:
            ok = h.pread(4096, 8192) == bytes([65 + i]) * 4096
        except nbd.Error as e:
            ok = False
            print(f"{export}: {e}")
        checks.check(f"export {export}: the same connection reads back what it wrote", ok)
    second.send_signal(signal.SIGTERM)
    second.wait(30)
    store.drain()
    for fd in store.fds.values():
        os.close(fd)


def ram_beside_file(checks, tmp, procs):
    with open(tmp.file("ram.yaml"), "w") as f:
        f.write(RAM_BESIDE_FILE.format(dir=tmp.path))
    sock = tmp.file("ram.sock")
    store = FdStore(tmp.file("notify-ram"))
    proc = start([nbdsched_binary(), "--config", tmp.file("ram.yaml"), "--fdstore-handover"], store,
                 tmp.file("ram.log"))
    procs.append(proc)
    if not checks.check("the daemon with a RAM device starts", wait_for(lambda: os.path.exists(sock), 10)):
        print(open(tmp.file("ram.log"), errors="replace").read()[-3000:])
        return
    h = connect(sock, "disk")
    proc.send_signal(signal.SIGTERM)
    status = proc.wait(30)
    store.drain()
    log = open(tmp.file("ram.log"), errors="replace").read()
    warning = next((line for line in log.splitlines() if "no hand-over through the fd store" in line), "")
    checks.check("SIGTERM exits 0", status == 0, f"status {status}")
    checks.check("nothing stored: the file device's connection closes too", not store.fds, f"{sorted(store.fds)}")
    checks.check("the warning names the RAM device", "device 'scratch'" in warning, warning)
    checks.check("the warning says what to do under systemd", "systemctl restart" in warning and
                 "file device" in warning, warning)
    checks.check("the warning does not offer --force, which systemd's restart cannot pass", "--force" not in warning,
                 warning)
    try:
        h.pread(512, 0)
        checks.check("the file device's client was disconnected", False)
    except nbd.Error:
        checks.check("the file device's client was disconnected", True)


def main():
    checks = Checks()
    tmp = TempDir("fdstore-shipped")
    procs = []   # every daemon started: stopped whatever failed
    with tmp:
        try:
            shipped_config(checks, tmp, procs)
            ram_beside_file(checks, tmp, procs)
        finally:
            stop_all(procs)
    checks.finish()


if __name__ == "__main__":
    main()
