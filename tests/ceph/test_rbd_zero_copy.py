"""Writes handed to librbd without a copy, on a real one-host cluster:
  - the daemon's librbd runs with rbd_disable_zero_copy_writes false (read
    through the client's admin socket: librbd's default, true, copies every
    write's data in the event loop's thread);
  - librbd then sends the request's own buffer, which the daemon reuses for
    the next request once the reply left: 1 MiB writes, each with its own
    data, several in flight on two connections (some FUA), read back whole
    after a FLUSH; a block overwritten right after its reply reads back the
    second data.
"""
import glob
import json
import subprocess

import nbd

from nbdsched_test.ceph import one_rbd_export, run_checks
from nbdsched_test.daemon import Daemon

MIB = 1 << 20
WRITES = 48      # 1 MiB each, over a 16 MiB image: every block written three times
DEPTH = 8


def payload(i):
    """1 MiB that no other write of the test carries: its number in every 8 bytes."""
    return (i.to_bytes(4, "little") + (~i & 0xFFFFFFFF).to_bytes(4, "little")) * (MIB // 8)


def conf_with(conf, line):
    """A copy of the cluster's ceph.conf with `line` in its [client] section."""
    path = conf + ".zero-copy"
    with open(conf) as f:
        text = f.read()
    assert "\n[client]\n" in text, "no [client] section"
    with open(path, "w") as f:
        f.write(text.replace("\n[client]\n", f"\n[client]\n{line}\n", 1))
    return path


def config_get(asok, key):
    r = subprocess.run(["ceph", "--admin-daemon", asok, "config", "get", key], capture_output=True, text=True,
                       timeout=30)
    return json.loads(r.stdout).get(key) if r.returncode == 0 else f"exit {r.returncode}: {r.stderr.strip()}"


class Connection:
    """A libnbd handle and its commands in flight (a cookie is retired once seen completed)."""

    def __init__(self, uri):
        self.h = nbd.NBD()
        self.h.connect_uri(uri)
        self.open = set()

    def wait_while(self, busy):
        while busy():
            self.h.poll(1000)
            self.open = {ck for ck in self.open if not self.h.aio_command_completed(ck)}


def zero_copy_checks(c, cluster, tmp):
    cluster.rbd("create", "--size", "16M", "rbd/imgzc")
    conf = conf_with(cluster.conf, f"admin socket = {tmp.path}/client.$pid.asok")
    d = Daemon(one_rbd_export(conf, "imgzc"), "zero-copy", workdir=tmp.path)
    sockets = glob.glob(f"{tmp.path}/client.{d.pid}.asok")
    value = config_get(sockets[0], "rbd_disable_zero_copy_writes") if sockets else "no admin socket"
    c.check("the daemon's librbd writes without copying (rbd_disable_zero_copy_writes false)", value == "false",
            value)

    conns = [Connection(d.uri("vol")), Connection(d.uri("vol"))]
    last = {}      # block -> the number of the write that lands last on it
    writing = {}   # block -> (connection, cookie) of its last write
    for i in range(WRITES):
        conn = conns[i % 2]
        block = i % 16
        if block in writing:   # two writes of a block in flight may land in either order
            other, ck = writing[block]
            other.wait_while(lambda: ck in other.open)
        conn.wait_while(lambda: len(conn.open) >= DEPTH)
        flags = nbd.CMD_FLAG_FUA if i % 3 == 0 else 0
        ck = conn.h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(payload(i))), block * MIB, flags=flags)
        conn.open.add(ck)
        writing[block] = (conn, ck)
        last[block] = i
    for conn in conns:
        conn.wait_while(lambda: conn.open)
    conns[0].h.flush()
    wrong = [b for b, i in sorted(last.items()) if conns[1].h.pread(MIB, b * MIB) != payload(i)]
    c.check(f"{WRITES} 1 MiB writes, {DEPTH} in flight per connection, read back whole", not wrong,
            f"blocks with other data: {wrong}")

    h = conns[0].h
    h.pwrite(payload(1000), 0)
    h.pwrite(payload(1001), 0, nbd.CMD_FLAG_FUA)
    c.check("a block overwritten right after its reply reads back the second data", h.pread(MIB, 0) == payload(1001))
    for conn in conns:
        conn.h.shutdown()
    d.stop()


if __name__ == "__main__":
    run_checks("rbd-zero-copy", zero_copy_checks)
