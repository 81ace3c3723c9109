"""Locks on an image that are not a live nbdsched's, on a real one-host cluster:
  - an advisory lock (`rbd lock add`, as fencing scripts and Kubernetes'
    in-tree rbd plugin take): start-up fails at once, with and without
    --break-lock, naming the lock and the `rbd lock ls` / `rbd lock rm`
    that show and remove it (librbd would wait for its owner for ever);
    once it is removed the daemon starts.
"""
import signal
import time

import nbd

from nbdsched_test.ceph import Cluster, rbd_config
from nbdsched_test.daemon import Daemon
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

REFUSAL_S = 15   # a refusal takes a few round trips; librbd's wait for an advisory lock never ends


def config(conf, image):
    return f"devices:\n  - {rbd_config('vol', image, conf)}\nexports:\n  - {{name: vol, device: vol}}\n"


def start_refused(c, name, d):
    """d started with wait=False: its exit status and log once it exited
    within REFUSAL_S (None if it still runs: then it is killed)."""
    deadline = time.monotonic() + REFUSAL_S
    while d.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if d.alive():
        d.stop(sig=signal.SIGKILL)
        c.check(f"{name}: start-up ends within {REFUSAL_S} s", False, "still waiting; killed")
        return None, d.log()
    return d.stop(), d.log()


def advisory_lock_checks(c, cluster, tmp):
    cluster.rbd("create", "--size", "16M", "rbd/adv")
    cluster.rbd("lock", "add", "rbd/adv", "mylock")
    for args in ([], ["--break-lock"]):
        name = "advisory lock" + (", --break-lock" if args else "")
        d = Daemon(config(cluster.conf, "adv"), "adv" + str(len(args)), workdir=tmp.path, args=args, wait=False)
        status, log = start_refused(c, name, d)
        if status is None:
            continue
        c.check(f"{name}: start-up fails at once", status not in (0, None), f"status {status}")
        c.check(f"{name}: the error names the advisory lock and how to remove it",
                "advisory lock" in log and "'mylock' by client." in log and "rbd lock ls rbd/adv" in log
                and "rbd lock rm rbd/adv 'mylock' client." in log, log.strip()[-500:])
    lockers = cluster.rbd("lock", "ls", "rbd/adv")
    c.check("the advisory lock is left alone", "mylock" in lockers, lockers)
    locker = next((line.split()[0] for line in lockers.splitlines() if "mylock" in line.split()), "")
    cluster.rbd("lock", "rm", "rbd/adv", "mylock", locker)
    d = Daemon(config(cluster.conf, "adv"), "adv-free", workdir=tmp.path)
    h = nbd.NBD()
    h.connect_uri(d.uri("vol"))
    h.pwrite(b"f" * 4096, 0, nbd.CMD_FLAG_FUA)
    c.check("once it is removed, the daemon starts and writes", h.pread(4096, 0) == b"f" * 4096)
    h.shutdown()
    d.stop()


def main():
    c = Checks()
    tmp = TempDir("rbd-locks")
    try:
        with Cluster(tmp.path, []) as cluster:
            try:
                advisory_lock_checks(c, cluster, tmp)
            except BaseException:
                c.failed.append("exception")
                raise
    finally:
        tmp.remove()
    c.finish()


if __name__ == "__main__":
    main()
