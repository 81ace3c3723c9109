"""A planned restart (--takeover) onto a configuration whose listen: changed:
the old daemon serves a plaintext unix socket and a TCP port; the new one
asks tls: require and mode: 0600 on the unix socket, drops that TCP port and
adds another. Checked: the old daemon exits 0; the new one refuses a
plaintext client on the unix socket and serves a TLS one there; the socket
file has mode 0600; the dropped port refuses connections, the added one
serves; a plaintext connection open across the restart on the socket that
now requires TLS is closed. A new process that fails before that changes
none of it. Before, the new process kept the old listeners
as they were: plaintext still served, the new port never bound, the mode
not applied.
"""
import os
import shutil
import stat
import subprocess

import nbd

from nbdsched_test.handover import log_of, start_generation
from nbdsched_test.process import free_port, stop_all, wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks, skip

OLD = """
listen: [{{unix: {dir}/nbd.sock}}, {{tcp: "127.0.0.1:{dropped}"}}]
control: {dir}/ctl.sock
devices: [{{name: d0, backend: file, path: {dir}/d0.img, size: 16MiB}}]
exports: [{{name: e0, device: d0}}]
"""
NEW = """
listen: [{{unix: {dir}/nbd.sock, tls: require, mode: 0600}}, {{tcp: "127.0.0.1:{added}"}}]
tls: {{psk_file: {dir}/keys.psk}}
control: {dir}/ctl.sock
devices: [{{name: d0, backend: file, path: {dir}/d0.img, size: 16MiB}}]
exports: [{{name: e0, device: d0}}]
"""


def connects(uri):
    h = nbd.NBD()
    h.set_uri_allow_local_file(True)
    try:
        h.connect_uri(uri)
        h.pread(4096, 0)
        return True
    except nbd.Error as e:
        print(f"{uri}: {e}")
        return False


def main():
    if not shutil.which("psktool"):
        skip("psktool (gnutls-bin) is not installed")
    checks = Checks()
    tmp = TempDir("takeover-listen")
    procs = []
    try:
        subprocess.run(["psktool", "-u", "alice", "-p", tmp.file("keys.psk")], check=True, capture_output=True)
        with open(tmp.file("d0.img"), "wb") as f:
            f.truncate(16 << 20)
        dropped, added = free_port(), free_port()
        while added == dropped:
            added = free_port()
        sock, handover = tmp.file("nbd.sock"), tmp.file("handover.sock")
        old = start_generation(tmp, "old", OLD.format(dir=tmp.path, dropped=dropped), ["--handover-socket", handover],
                               procs)
        checks.check("old daemon up", wait_for(lambda: os.path.exists(handover) and os.path.exists(sock), 10))
        plain = nbd.NBD()
        plain.connect_uri(f"nbd+unix:///e0?socket={sock}")
        plain.pwrite(b"a" * 4096, 0)
        # A new process that fails after it received everything (its control
        # socket cannot be made) leaves the old one's sockets as they were.
        with open(tmp.file("not-a-dir"), "w"):
            pass
        failing = NEW.format(dir=tmp.path, added=added).replace(f"control: {tmp.path}/ctl.sock",
                                                                 f"control: {tmp.path}/not-a-dir/ctl.sock")
        status = start_generation(tmp, "failing", failing, ["--takeover", handover], procs).wait(30)
        checks.check("a new process that cannot make its control socket fails", status != 0, f"{status}")
        checks.check("... and the old one serves on, its socket file and port as they were",
                     old.poll() is None and os.path.exists(sock) and stat.S_IMODE(os.stat(sock).st_mode) != 0o600
                     and connects(f"nbd+unix:///e0?socket={sock}") and connects(f"nbd://127.0.0.1:{dropped}/e0"))
        start_generation(tmp, "new", NEW.format(dir=tmp.path, added=added), ["--takeover", handover], procs)
        checks.check("old daemon exits 0 after the hand-over", old.wait(20) == 0)
        checks.check("new daemon ready", wait_for(lambda: "nbdsched: ready" in log_of(tmp, "new"), 10))

        try:
            plain.pwrite(b"b" * 4096, 0)
            carried = True
        except nbd.Error as e:
            print(f"handed-over plaintext connection: {e}")
            carried = False
        del plain
        checks.check("a plaintext connection on the socket that now requires TLS is closed", not carried)
        checks.check("a plaintext client is refused on the socket that requires TLS now",
                     not connects(f"nbd+unix:///e0?socket={sock}"))
        checks.check("a TLS client is served there",
                     connects(f"nbds+unix://alice@/e0?socket={sock}&tls-psk-file={tmp.file('keys.psk')}"))
        mode = stat.S_IMODE(os.stat(sock).st_mode)
        checks.check("the socket file has the new mode 0600", mode == 0o600, oct(mode))
        checks.check("the added TCP listener serves", connects(f"nbd://127.0.0.1:{added}/e0"))
        checks.check("the dropped TCP listener is closed", not connects(f"nbd://127.0.0.1:{dropped}/e0"))
        new_log = log_of(tmp, "new")
        checks.check("the new daemon logs what it changed",
                     "tls: require (was off)" in new_log and "is new in this configuration" in new_log
                     and "is not in this configuration" in new_log)
        if checks.failed:
            print(new_log[-3000:])
    finally:
        stop_all(procs)
        tmp.remove()
    checks.finish()


if __name__ == "__main__":
    main()
