#!/usr/bin/python3
"""Socket activation through the real systemd-socket-activate tool: it
listens on a unix socket and a loopback TCP port and starts the daemon at
the first connection with both sockets inherited. The daemon must serve
on them (libnbd writes and reads back; nbdinfo over TCP) and must not bind
the listen address of its configuration instead.

usage: socket_activation_test.py NBDSCHED
       socket_activation_test.py --roundtrip SOCKET   (the libnbd client part)"""
import os
import shutil
import sys

from nbdsched_test.daemon import Daemon, one_ram_export
from nbdsched_test.patterns import pattern
from nbdsched_test.process import free_port, run_bounded, wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks, skip

try:
    import nbd
except ImportError:
    skip("python3-libnbd is not installed (scripts/deps installs it)")


def libnbd_roundtrip(sock_path):
    """Connect, write a pattern, flush, read it back; prints "SIZE SAME"."""
    h = nbd.NBD()
    h.set_export_name("default")
    h.connect_unix(sock_path)
    size = h.get_size()
    data = pattern(1 << 20, 65536)
    h.pwrite(data, 1 << 20)
    h.flush()
    back = h.pread(len(data), 1 << 20)
    h.shutdown()
    print(size, back == data)


def main(daemon):
    tool = shutil.which("systemd-socket-activate")
    if not tool:
        skip("systemd-socket-activate is not installed (apt-get install systemd)")
    tmp = TempDir("activate")
    checks = Checks()
    sock_path = tmp.file("activated.sock")
    port = free_port()
    # The tool starts the daemon at the first connection: nothing to wait for yet.
    d = Daemon(one_ram_export(), "activate", workdir=tmp.path, control=False, binary=daemon,
               wrapper=[tool, "-l", sock_path, "-l", f"127.0.0.1:{port}", "--fdname=nbd-unix:nbd-tcp"],
               wait=False)
    try:
        checks.check("systemd-socket-activate listens", wait_for(lambda: os.path.exists(sock_path), 10))
        rc, out = run_bounded([sys.executable, __file__, "--roundtrip", sock_path])
        checks.check("libnbd on the activated unix socket: size 64 MiB",
                     rc == 0 and out.split()[:1] == [str(64 << 20)], out)
        checks.check("libnbd on the activated unix socket: write, read back",
                     rc == 0 and out.split()[1:2] == ["True"], out)
        rc, out = run_bounded(["nbdinfo", "--size", f"nbd://127.0.0.1:{port}/default"])
        checks.check("nbdinfo on the activated TCP socket", rc == 0 and out == str(64 << 20), out)
        checks.check("the config's own listen address is not bound", not os.path.exists(d.sock))
        rc = d.stop()
        checks.check("exit status 0 after SIGTERM", rc == 0, f"status {rc}")
    finally:
        checks.clean_up(d, tmp)
    checks.finish()


if __name__ == "__main__":
    if sys.argv[1] == "--roundtrip":
        libnbd_roundtrip(sys.argv[2])
    else:
        main(sys.argv[1])
