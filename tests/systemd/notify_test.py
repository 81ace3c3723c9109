#!/usr/bin/python3
"""The real daemon speaks the sd_notify protocol: listening on a
NOTIFY_SOCKET datagram socket, we must see READY=1 (only once clients can
connect), RELOADING=1 then READY=1 around SIGHUP, STOPPING=1 on SIGTERM,
in that order, and exit status 0.

usage: notify_test.py NBDSCHED"""
import os
import socket
import sys

from nbdsched_test.daemon import Daemon, one_ram_export
from nbdsched_test.process import run_bounded, wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks


def main(daemon):
    tmp = TempDir("notify")
    checks = Checks()
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(tmp.file("notify"))
    notify.settimeout(0.2)
    messages = []

    def drain():
        try:
            while True:
                messages.append(notify.recv(4096).decode())
        except (socket.timeout, BlockingIOError):
            pass

    def count(key):
        drain()
        return sum(key in m.split("\n") for m in messages)

    def seen(key):
        return count(key) > 0

    env = dict(os.environ, NOTIFY_SOCKET=tmp.file("notify"))
    # READY=1 says when it is ready: the test waits for that, not for a connection
    d = Daemon(one_ram_export(), "notify", workdir=tmp.path, control=False, env=env, binary=daemon,
               wait=False)
    try:
        ready = checks.check("READY=1 after start", wait_for(lambda: seen("READY=1"), 20))
        if ready:
            rc, out = run_bounded(["nbdinfo", "--size", d.uri("default")])
            checks.check("clients can connect once READY=1 is sent", rc == 0, out)
            checks.check("STATUS= sent with READY=1",
                         any("READY=1" in m and "STATUS=" in m for m in messages))
        d.hup()
        checks.check("RELOADING=1 after SIGHUP", wait_for(lambda: seen("RELOADING=1"), 10))
        checks.check("READY=1 again after the reload",
                     wait_for(lambda: count("READY=1") >= 2, 10))
        rc = d.stop()
        checks.check("STOPPING=1 after SIGTERM", wait_for(lambda: seen("STOPPING=1"), 10))
        checks.check("exit status 0 after SIGTERM", rc == 0, f"status {rc}")
        drain()
        order = [k for m in messages for k in m.split("\n")
                 if k in ("READY=1", "RELOADING=1", "STOPPING=1")]
        checks.check("order READY, RELOADING, READY, STOPPING",
                     order == ["READY=1", "RELOADING=1", "READY=1", "STOPPING=1"], f"got {order}")
        for m in messages:
            print("  message: " + m.replace("\n", " | "))
    finally:
        checks.clean_up(d, tmp)
    checks.finish()


if __name__ == "__main__":
    main(sys.argv[1])
