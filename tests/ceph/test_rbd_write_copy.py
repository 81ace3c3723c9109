"""librbd copies each write's data, whatever the device's ceph.conf says,
on a real one-host cluster. Without the copy (`rbd disable zero copy
writes = false`) librbd holds a write's completion back until nothing
refers to the buffer, and a daemon blocklisted by another's --break-lock
never got the completion of its next write: the write hung (docs/rbd.md).
With that line in ceph.conf:
  - the daemon's librbd has rbd_disable_zero_copy_writes true (read through
    the client's admin socket);
  - after a new daemon broke its lock, the old daemon's FUA write fails
    (ESHUTDOWN) within a bound instead of waiting forever;
  - the new daemon's acknowledged write stays.
"""
import glob
import json
import signal
import subprocess
import time

import nbd

from nbdsched_test.ceph import conf_with, one_rbd_export, run_checks
from nbdsched_test.daemon import Daemon

ANSWER_S = 20   # the fenced write fails at once (base: under 1 s); a loaded host gets room


def config_get(asok, key):
    r = subprocess.run(["ceph", "--admin-daemon", asok, "config", "get", key], capture_output=True, text=True,
                       timeout=30)
    return json.loads(r.stdout).get(key) if r.returncode == 0 else f"exit {r.returncode}: {r.stderr.strip()}"


def write_outcome(h, data, offset, seconds):
    """How a FUA write through h ended: "" (succeeded), the error's text, or None if still waiting after `seconds`."""
    cookie = h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data)), offset, flags=nbd.CMD_FLAG_FUA)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        h.poll(500)
        try:
            if h.aio_command_completed(cookie):
                return ""
        except nbd.Error as e:
            return str(e)
    return None


def write_copy_checks(c, cluster, tmp):
    cluster.rbd("create", "--size", "16M", "rbd/imgcopy")
    lines = f"rbd disable zero copy writes = false\nadmin socket = {tmp.path}/client.$pid.asok"
    conf = conf_with(cluster.conf, lines, "write-copy")
    old = Daemon(one_rbd_export(conf, "imgcopy"), "copy-old", workdir=tmp.path)
    new = None
    hung = False
    try:
        sockets = glob.glob(f"{tmp.path}/client.{old.pid}.asok")
        value = config_get(sockets[0], "rbd_disable_zero_copy_writes") if sockets else "no admin socket"
        c.check("the daemon's librbd copies writes, though ceph.conf says not to", value == "true", value)

        ho = nbd.NBD()
        ho.connect_uri(old.uri("vol"))
        ho.pwrite(b"o" * 4096, 0, nbd.CMD_FLAG_FUA)
        new = Daemon(one_rbd_export(conf, "imgcopy"), "copy-new", workdir=tmp.path, args=["--break-lock"])
        hn = nbd.NBD()
        hn.connect_uri(new.uri("vol"))
        hn.pwrite(b"n" * 4096, 0, nbd.CMD_FLAG_FUA)
        started = time.monotonic()
        err = write_outcome(ho, b"x" * 4096, 0, ANSWER_S)
        hung = err is None
        c.check(f"the fenced daemon's FUA write fails with ESHUTDOWN within {ANSWER_S} s",
                err is not None and "ESHUTDOWN" in err,
                f"still waiting after {ANSWER_S} s" if hung else f"{err or 'it succeeded'} after "
                f"{time.monotonic() - started:.1f} s")
        c.check("the new daemon's acknowledged write stays", hn.pread(4096, 0) == b"n" * 4096)
        hn.shutdown()
    finally:
        if new:
            new.stop()
        old.stop(sig=signal.SIGKILL if hung else signal.SIGTERM)   # a hung write would hold a graceful stop


if __name__ == "__main__":
    run_checks("rbd-write-copy", write_copy_checks)
