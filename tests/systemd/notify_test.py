#!/usr/bin/python3
"""The real daemon speaks the sd_notify protocol: listening on a
NOTIFY_SOCKET datagram socket, we must see READY=1 (only once clients can
connect), RELOADING=1 then READY=1 around SIGHUP, STOPPING=1 on SIGTERM,
in that order, and exit status 0.

usage: notify_test.py NBDSCHED"""
import os
import signal
import socket
import subprocess
import sys

from sdtest import Checks, TempDir, run_bounded, sigterm_status, wait_for, wrap_up, write_config


def main(daemon):
    tmp = TempDir("notify")
    checks = Checks()
    sock_path = tmp("nbd.sock")
    write_config(tmp("c.yaml"), sock_path)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(tmp("notify"))
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

    env = dict(os.environ, NOTIFY_SOCKET=tmp("notify"))
    log = open(tmp("daemon.log"), "w")
    proc = subprocess.Popen([daemon, "--config", tmp("c.yaml")], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        ready = checks.check("READY=1 after start", wait_for(lambda: seen("READY=1"), 20))
        if ready:
            rc, out = run_bounded(["nbdinfo", "--size", f"nbd+unix:///default?socket={sock_path}"])
            checks.check("clients can connect once READY=1 is sent", rc == 0, out)
            checks.check("STATUS= sent with READY=1",
                         any("READY=1" in m and "STATUS=" in m for m in messages))
        proc.send_signal(signal.SIGHUP)
        checks.check("RELOADING=1 after SIGHUP", wait_for(lambda: seen("RELOADING=1"), 10))
        checks.check("READY=1 again after the reload",
                     wait_for(lambda: count("READY=1") >= 2, 10))
        rc = sigterm_status(proc)
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
        wrap_up(proc, log, checks, tmp)


if __name__ == "__main__":
    main(sys.argv[1])
