"""Locks on an image that are not a live nbdsched's, on a real one-host cluster:
  - an advisory lock (`rbd lock add`, as fencing scripts and Kubernetes'
    in-tree rbd plugin take): start-up fails at once, with and without
    --break-lock, naming the lock and the `rbd lock ls` / `rbd lock rm`
    that show and remove it (librbd would wait for its owner for ever);
    once it is removed the daemon starts;
  - rbd_blocklist_on_break_lock = false (librbd then breaks a lock without
    fencing its holder), in the breaker's ceph.conf and as an image's
    `rbd config image set`: --break-lock still blocklists the live old
    daemon, whose FUA writes fail with ESHUTDOWN while the new one's
    data stays; and the take-back after a failed hand-over blocklists the
    failed new process (played with librbd's Python binding), whose
    writes fail.
"""
import signal
import time

import nbd

from nbdsched_test.ceph import LockThief, one_rbd_export, run_checks
from nbdsched_test.daemon import Daemon

REFUSAL_S = 15   # a refusal takes a few round trips; librbd's wait for an advisory lock never ends



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
        d = Daemon(one_rbd_export(cluster.conf, "adv"), "adv" + str(len(args)), workdir=tmp.path, args=args, wait=False)
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
    d = Daemon(one_rbd_export(cluster.conf, "adv"), "adv-free", workdir=tmp.path)
    h = nbd.NBD()
    h.connect_uri(d.uri("vol"))
    h.pwrite(b"f" * 4096, 0, nbd.CMD_FLAG_FUA)
    c.check("once it is removed, the daemon starts and writes", h.pread(4096, 0) == b"f" * 4096)
    h.shutdown()
    d.stop()


def no_fence_conf(cluster, tmp):
    """A copy of the cluster's ceph.conf with rbd_blocklist_on_break_lock off."""
    with open(cluster.conf) as f:
        text = f.read()
    path = tmp.file("no-fence.conf")
    with open(path, "w") as f:
        f.write(text.replace("[client]\n", "[client]\nrbd blocklist on break lock = false\n"))
    return path


def write_error(h, offset):
    """How a FUA write through h failed ("" when it succeeded)."""
    try:
        h.pwrite(b"o" * 4096, offset, nbd.CMD_FLAG_FUA)
        return ""
    except nbd.Error as e:
        return str(e)   # libnbd's errno is not set for every NBD error: its text names it


def break_lock_fences(c, cluster, tmp, image, breaker_conf):
    """The old daemon keeps serving (cut off, not dead) while a new one
    starts with --break-lock: the old one must not write after that."""
    name = f"--break-lock ({image})"
    old = Daemon(one_rbd_export(cluster.conf, image), image + "-old", workdir=tmp.path)
    new = None
    try:
        ho = nbd.NBD()
        ho.connect_uri(old.uri("vol"))
        ho.pwrite(b"o" * 4096, 0, nbd.CMD_FLAG_FUA)   # object 0 exists now
        new = Daemon(one_rbd_export(breaker_conf, image), image + "-new", workdir=tmp.path, args=["--break-lock"])
        hn = nbd.NBD()
        hn.connect_uri(new.uri("vol"))
        hn.pwrite(b"n" * 4096, 0, nbd.CMD_FLAG_FUA)
        err = write_error(ho, 0)
        c.check(f"{name}: the old daemon's FUA write to an existing object fails with ESHUTDOWN",
                "ESHUTDOWN" in err, err or "it succeeded")
        err = write_error(ho, 8 << 20)
        c.check(f"{name}: ... and to a new object", "ESHUTDOWN" in err, err or "it succeeded")
        c.check(f"{name}: the new daemon's acknowledged write stays", hn.pread(4096, 0) == b"n" * 4096)
        hn.shutdown()
    finally:
        if new:
            new.stop()
        old.stop()


def take_back_fences(c, cluster, tmp):
    """A failed hand-over whose new process kept the lock (LockThief): the
    old daemon breaks that lock and must fence it, though the image says
    rbd_blocklist_on_break_lock = false."""
    sock_path = tmp.file("handover.sock")
    d = Daemon(one_rbd_export(cluster.conf, "tb"), "tb", workdir=tmp.path, args=["--handover-socket", sock_path])
    try:
        thief = LockThief(cluster, sock_path, "tb")
        c.check("take-back: the old daemon hands over", thief.reply.startswith("state "))
        c.check("take-back: the old daemon breaks the lock and takes it back",
                d.wait_log("took its lock back from client.", 30))
        error = thief.write_error(0)
        c.check("take-back: the failed new process's writes fail (blocklisted)", error != "", error or "it wrote")
        thief.close()
        h = nbd.NBD()
        h.connect_uri(d.uri("vol"))
        h.pwrite(b"d" * 4096, 0, nbd.CMD_FLAG_FUA)
        c.check("take-back: the old daemon writes on, and its write stays", h.pread(4096, 0) == b"d" * 4096)
        h.shutdown()
    finally:
        d.stop()


def fencing_checks(c, cluster, tmp):
    for image in ("nofence-conf", "nofence-image", "tb"):
        cluster.rbd("create", "--size", "16M", f"rbd/{image}")
    break_lock_fences(c, cluster, tmp, "nofence-conf", no_fence_conf(cluster, tmp))
    cluster.rbd("config", "image", "set", "rbd/nofence-image", "rbd_blocklist_on_break_lock", "false")
    break_lock_fences(c, cluster, tmp, "nofence-image", cluster.conf)
    cluster.rbd("config", "image", "set", "rbd/tb", "rbd_blocklist_on_break_lock", "false")
    take_back_fences(c, cluster, tmp)


if __name__ == "__main__":
    run_checks("rbd-locks", advisory_lock_checks, fencing_checks)
