"""An OSD paused (SIGSTOP) for 10 s under load, on a real one-host cluster:
  - fio's random writes on a device without osd_op_timeout wait and then
    complete: no error, and fio's worst latency shows the pause;
  - the stall shows in `ctl stats` while it lasts: requests in flight,
    none completed between two looks 2 s apart;
  - on a device with osd_op_timeout: 3, a FUA write issued during the pause
    fails with EIO after about the timeout, before the OSD is back;
  - a planned restart while the lock release (after the flushes) needs
    the paused OSD fails after the drain timeout, ctl answers meanwhile, and
    once the OSD is back the old daemon takes its lock again and writes on;
  - a hand-over that fails after the release, with the OSD paused while
    the old daemon takes its lock back: ctl, a RAM device and the hand-over
    socket (refusing a next hand-over) answer meanwhile; once the OSD is
    back the lock is back and a FUA write reads back (a daemon of its own);
    stopped while a take-back waits, it exits 1 within its drain timeouts;
  - a take-back that fails (osd_op_timeout with the OSD paused) is tried
    again with a backoff, `ctl stats` shows the lock lost meanwhile, a next
    hand-over may begin between two tries; once the OSD is back a retry
    takes the lock and a FUA write reads back, and the log's counts of its
    failed tries add up; stopped while its lock is lost again, it exits 0
    without flushing it;
  - a planned restart (`--takeover`) while a flush needs the paused OSD
    fails after the drain timeout instead of freezing the daemon: the new
    process exits 1 naming the device, ctl answers while the OSD is still
    paused, and the client goes on once it is back;
  - stopped while the OSD is paused again, the daemon exits after its
    bounded final flush (status 1, naming the device), never hangs;
  - stopped idle with the OSD paused, it exits 1 naming the close of the
    image; a plain restart waits ~30 s for the dead process's lock and says
    so: a warning before (the holder, the cluster dropping its watch,
    --break-lock), how long it took after, and systemd's start timeout
    extended meanwhile (EXTEND_TIMEOUT_USEC on $NOTIFY_SOCKET).
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import nbd

from nbdsched_test import fio
from nbdsched_test.ceph import Cluster, completed_within, rbd_config
from nbdsched_test.daemon import DRAIN_LIMITS, DRAIN_TIMEOUT_S, Daemon
from nbdsched_test.handover import connect_handover, handover_message, handover_reply
from nbdsched_test.process import wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

PAUSE = 10
TIMEOUT = 3
WRITE_ONE = """import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
try:
    h.pwrite(bytes(4096), 0, nbd.CMD_FLAG_FUA)
except nbd.Error as e:
    sys.exit(f"write failed: {e} (errno {e.errno})")
"""


def config(conf):
    return (DRAIN_LIMITS + "devices:\n"
            f"  - {rbd_config('waits', 'img1', conf, scheduler='bfq', rotational='false')}\n"
            f"  - {rbd_config('fails', 'img2', conf, rotational='false', osd_op_timeout=TIMEOUT)}\n"
            "exports:\n  - {name: waits, device: waits}\n  - {name: fails, device: fails}\n")


def counters(d):
    return d.device(d.stats(), "waits")["counters"]


def new_process_config(tmp, name):
    """The new process has a file device of its own: opening an image would
    wait for the paused OSD before it even asks for the hand-over."""
    path = tmp.file(f"{name}.yaml")
    with open(path, "w") as f:
        f.write(f"listen: [{{unix: {tmp.file(name + '.sock')}}}]\n"
                f"devices: [{{name: waits, backend: file, path: {tmp.file(name + '.img')}, size: 64MiB}}]\n"
                "exports: [{name: waits, device: waits}]\n")
    return path


def takeover_fails(c, d, tmp, name, what):
    """`--takeover` with the OSD paused: the new process exits 1 naming the
    device and `what` (flush, lock release) that did not finish within the
    drain timeout; the old daemon serves on and ctl answers meanwhile (the
    wait is off its event loop)."""
    asked = time.monotonic()
    r = subprocess.run([d.binary, "--config", new_process_config(tmp, name), "--takeover", tmp.file("handover.sock")],
                       capture_output=True, text=True, timeout=DRAIN_TIMEOUT_S * 3 + 30)
    took = time.monotonic() - asked
    c.check(f"--takeover with the OSD paused: the new process exits 1, the {what} named",
            r.returncode == 1 and f"device waits: {what} did not finish within {DRAIN_TIMEOUT_S * 1000} ms" in r.stderr,
            f"after {took:.1f} s: {r.stderr.strip()[-200:]}")
    c.check(f"the old daemon logs the failed hand-over ({what}) and serves on",
            d.alive() and d.wait_log(f"hand-over failed: device waits: {what} did not finish", 5))
    c.check(f"ctl answers while the OSD is still paused ({what})",
            wait_for(lambda: os.path.exists(d.control), 5) and len(d.stats()["devices"]) == 2)


def handover_release_with_osd_paused(c, d, cluster, tmp):
    """Nothing dirty: the hand-over's flushes come back without the OSD, then
    rbd_lock_release needs it. The release runs off the event loop, bounded
    like the flush: the hand-over fails after the drain timeout, the old
    daemon answers ctl meanwhile, and once the OSD is back it takes its lock
    again and its client writes on."""
    h = nbd.NBD()
    h.connect_uri(d.uri("waits"))
    h.pwrite(b"r" * 4096, 8192, nbd.CMD_FLAG_FUA)
    h.flush()
    cluster.signal_osd(signal.SIGSTOP)
    try:
        takeover_fails(c, d, tmp, "new-release", "lock release")
    finally:
        cluster.signal_osd(signal.SIGCONT)
    c.check("once the OSD is back, the release ends and the old daemon takes its locks back",
            d.wait_log("the locks are taken back", 60))
    h.pwrite(b"s" * 4096, 12288, nbd.CMD_FLAG_FUA)
    c.check("... and its client writes on", h.pread(8192, 8192) == b"r" * 4096 + b"s" * 4096)
    h.shutdown()


def answer_within(ask, seconds):
    """ask()'s answer, or None when it did not come within `seconds` (a
    socket timeout, a process killed after its timeout)."""
    try:
        return ask(seconds)
    except (socket.timeout, subprocess.TimeoutExpired, EOFError, ConnectionError):
        return None


def ctl_stats(d, seconds):
    r = subprocess.run([d.binary, "ctl", "--socket", d.control, "stats"], capture_output=True, text=True,
                       timeout=seconds)
    return r.returncode == 0 and "retake" in r.stdout


def nbd_reads(h, seconds):
    buf = nbd.Buffer(4096)
    return buf.to_bytearray() if completed_within(h, h.aio_pread(buf, 0), seconds) else None


def retake_config(conf):
    return (DRAIN_LIMITS + "devices:\n"
            f"  - {rbd_config('retake', 'img3', conf, rotational='false')}\n"
            "  - {name: mem, backend: ram, size: 16MiB}\n"
            "exports:\n  - {name: retake, device: retake}\n  - {name: mem, device: mem}\n")


def fail_after_release(c, d, cluster, tmp, what, why, handover_socket="retake-handover.sock"):
    """A hand-over with the OSD up (the flushes and lock release done), then
    the OSD paused (the caller resumes it) and the new process failing: the
    old daemon takes its lock back while the OSD does not answer."""
    new = connect_handover(tmp.file(handover_socket))
    handover_message(new, "takeover force")   # force: the RAM device
    state = answer_within(lambda s: handover_reply(new), DRAIN_TIMEOUT_S * 3 + 10) or "no answer"
    c.check(f"{what}: the old daemon flushed, released its lock and passed its state", state.startswith("state "),
            state[:120])
    cluster.signal_osd(signal.SIGSTOP)
    handover_message(new, "failed " + why)
    new.close()
    c.check(f"{what}: the old daemon logs the failed hand-over", d.wait_log("hand-over failed: " + why, 10))


def take_back_with_osd_paused(c, cluster, tmp):
    """The hand-over passes everything (flushes and lock release done with
    the OSD up), then the OSD is paused and the new process fails: the old
    daemon takes its lock back off its event loops. Meanwhile ctl answers, a
    RAM device serves, and a next hand-over is refused naming the take-back;
    the image's connection stays parked for the drain timeout (its writes
    would fail), then serves on; after SIGCONT the lock is back and a FUA
    write reads back. Then a stop while taking back."""
    with Daemon(retake_config(cluster.conf), "retake", workdir=tmp.path,
                args=["--handover-socket", tmp.file("retake-handover.sock")]) as d:
        rbd = nbd.NBD()
        rbd.connect_uri(d.uri("retake"))
        rbd.pwrite(b"k" * 4096, 0, nbd.CMD_FLAG_FUA)
        mem = nbd.NBD()
        mem.connect_uri(d.uri("mem"))
        mem.pwrite(b"m" * 4096, 0)
        try:
            fail_after_release(c, d, cluster, tmp, "take-back", "the test's new process gives up after the release")
            c.check("take-back: ctl answers while the OSD is paused",
                    wait_for(lambda: os.path.exists(d.control), 5) and answer_within(lambda s: ctl_stats(d, s), 5))
            c.check("take-back: the RAM device serves meanwhile", answer_within(lambda s: nbd_reads(mem, s), 5)
                    == b"m" * 4096)
            second = answer_within(lambda s: connect_handover(tmp.file("retake-handover.sock"), s), 5)
            if second:
                handover_message(second, "takeover force")
                refusal = answer_within(lambda s: handover_reply(second), 5) or "no answer"
                second.close()
            else:
                refusal = "no connection"
            c.check("take-back: a next hand-over is refused, naming the lock still being taken back",
                    refusal.startswith("refused device retake: taking back its lock after an earlier hand-over "
                                       "has not finished"), refusal[:160])
            c.check("take-back: the lock is not back while the OSD is paused",
                    "the locks are taken back" not in d.log())
            c.check("take-back: the image's connection, held parked meanwhile, serves on after the drain timeout",
                    d.wait_log(f"the lock of device retake is not back after {DRAIN_TIMEOUT_S * 1000} ms",
                               DRAIN_TIMEOUT_S + 5))
        finally:
            cluster.signal_osd(signal.SIGCONT)
        c.check("take-back: once the OSD is back, the old daemon logs its locks taken back",
                d.wait_log("hand-over: the locks are taken back", 60))
        wrote = completed_within(rbd, rbd.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"l" * 4096)), 4096,
                                                     flags=nbd.CMD_FLAG_FUA), 30)
        c.check("take-back: ... and a FUA write reads back",
                wrote and nbd_reads(rbd, 10) == b"k" * 4096 and rbd.pread(4096, 4096) == b"l" * 4096)
        if c.failed:
            d.print_log_tail(40)
            return   # the daemon may be stuck: Daemon's exit kills it
        mem.shutdown()
        stop_while_taking_back(c, d, cluster, tmp)


def sigterm_and_wait(d, timeout):
    """SIGTERM, then the daemon's exit status (None if it still runs after
    `timeout` s) and how long it took."""
    d.send(signal.SIGTERM)
    sent = time.monotonic()
    try:
        status = d.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = None
    return status, time.monotonic() - sent


def stop_while_taking_back(c, d, cluster, tmp):
    """The same failed hand-over, then SIGTERM while the lock is still being
    taken back: the daemon exits 1 within its drain timeouts, naming what
    it left (the take-back, or the final flush when that waits too)."""
    try:
        fail_after_release(c, d, cluster, tmp, "stop while taking back", "the test's new process gives up again")
        status, took = sigterm_and_wait(d, DRAIN_TIMEOUT_S * 3 + 15)
        log = d.log()
        c.check("stop while taking back: the daemon exits 1 within its drain timeouts",
                status == 1 and took < DRAIN_TIMEOUT_S * 3 + 15, f"status {status} after {took:.1f} s")
        c.check("... naming what still waits for the storage",
                "device retake: the take-back of the lock of a failed hand-over still waits for the storage" in log
                or "device retake: the flush at shutdown did not finish" in log,
                next((line for line in log.splitlines() if "device retake: the" in line), "nothing named")[-160:])
    finally:
        cluster.signal_osd(signal.SIGCONT)


def lock_lost(d, name):
    """`ctl stats` says the device's writes fail because its lock is not back."""
    return d.device(d.stats(), name).get("lock_lost")


def handover_between_tries(path):
    """A hand-over asked for (and failed by the test's new process) while
    the old daemon retries taking a lock back; refused during a try, so
    asked again until it falls between two. Its last reply."""
    deadline = time.monotonic() + 40
    reply = "no answer"
    while time.monotonic() < deadline:
        new = answer_within(lambda s: connect_handover(path, s), 5)
        if not new:
            return "no connection"
        handover_message(new, "takeover")
        reply = answer_within(lambda s: handover_reply(new), DRAIN_TIMEOUT_S * 3 + 10) or "no answer"
        if reply.startswith("state "):
            handover_message(new, "failed the test's new process gives up again")
        new.close()
        if "taking back its lock" not in reply:
            return reply
        time.sleep(0.2)
    return reply


def take_back_retried(c, cluster, tmp):
    """A take-back that fails, then succeeds: with osd_op_timeout the OSD
    paused makes each attempt fail (a timeout) instead of waiting. The old
    daemon tries again with a backoff, `ctl stats` shows the lock lost
    meanwhile, and a next hand-over may begin between two tries (the device
    has no lock to release); once the OSD is back a retry takes the lock,
    and a FUA write through the old daemon reads back."""
    sock = "retry-handover.sock"
    cfg = (DRAIN_LIMITS + "devices:\n"
           f"  - {rbd_config('retry', 'img4', cluster.conf, rotational='false', osd_op_timeout=TIMEOUT)}\n"
           "exports:\n  - {name: retry, device: retry}\n")
    with Daemon(cfg, "retry", workdir=tmp.path, args=["--handover-socket", tmp.file(sock)]) as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("retry"))
        h.pwrite(b"p" * 4096, 0, nbd.CMD_FLAG_FUA)
        c.check("retried take-back: before the hand-over, the device's lock is not lost", lock_lost(d, "retry") is False)
        try:
            fail_after_release(c, d, cluster, tmp, "retried take-back", "the test's new process gives up", sock)
            c.check("retried take-back: with the OSD paused, taking the lock back fails (osd_op_timeout)",
                    d.wait_log("taking the locks back failed: device retry", TIMEOUT * 4 + 10))
            c.check("retried take-back: ctl stats shows the device's lock lost",
                    wait_for(lambda: os.path.exists(d.control), 5) and lock_lost(d, "retry") is True)
            c.check("retried take-back: it is tried again, and fails again while the OSD is paused",
                    d.wait_log("device retry: taking its lock back failed again", TIMEOUT * 4 + 10))
            reply = handover_between_tries(tmp.file(sock))
            c.check("retried take-back: between two tries, a next hand-over begins (no lock to release)",
                    reply.startswith("state ") and d.wait_log("hand-over: device retry has no lock to hand over", 5),
                    reply[:160])
            c.check("retried take-back: once that one fails too, the lock is still lost and tried again",
                    d.wait_log("hand-over failed: the test's new process gives up again", 10)
                    and lock_lost(d, "retry") is True)
        finally:
            cluster.signal_osd(signal.SIGCONT)
        answered = cluster.wait_answering("img4")
        c.check("retried take-back: the cluster answers again after the pause", answered is not None,
                f"after {answered:.1f} s" if answered is not None else "no answer")
        c.check("retried take-back: once the OSD is back, a retry takes the lock back",
                d.wait_log("device retry: its lock is back after", 60))
        counts = failure_counts(d.log(), "retry")
        c.check("retried take-back: the log counts the device's failed tries (the first retry is attempt 2)",
                counts_add_up(counts), str(counts))
        try:
            wrote = completed_within(h, h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(b"q" * 4096)), 4096,
                                                     flags=nbd.CMD_FLAG_FUA), 30)
            wrote = wrote and h.pread(8192, 0) == b"p" * 4096 + b"q" * 4096
        except nbd.Error as e:   # EROFS from librbd reaches the client as EPERM
            wrote = e
        c.check("retried take-back: ... a FUA write through the old daemon reads back", wrote is True, str(wrote))
        c.check("retried take-back: ... and ctl stats shows the lock held again", lock_lost(d, "retry") is False)
        if c.failed:
            d.print_log_tail(40)
            return
        h.shutdown()
        stop_with_lock_lost(c, d, cluster, tmp, sock)


def failure_counts(log, device):
    """What the log says of `device`'s failed take-backs, in order: ("again",
    N) for a failed retry (attempt N), ("handover", N) for a hand-over while
    N had failed, ("back", N) when the lock came back at attempt N."""
    patterns = {"again": rf"device {device}: taking its lock back failed again \(attempt (\d+)\)",
                "handover": rf"hand-over: device {device} has no lock to hand over \(taking it back failed (\d+) time",
                "back": rf"device {device}: its lock is back after (\d+) attempt"}
    out = []
    for line in log.splitlines():
        for kind, pattern in patterns.items():
            if m := re.search(pattern, line):
                out.append((kind, int(m.group(1))))
    return out


def counts_add_up(counts):
    """The first retry logged is attempt 2 (the take-back that lost the
    lock was the first); a hand-over counts every failure before it; the
    success is one attempt past every failure. Failed retries past the log's
    rate limit leave gaps, so only the order is checked, not steps of one."""
    if not counts or counts[0] != ("again", 2) or counts[-1][0] != "back":
        return False
    failed = 0
    for kind, n in counts:
        if kind == "again" and n <= failed:
            return False
        if kind == "handover" and n < failed:
            return False
        if kind == "back" and n <= failed:
            return False
        failed = n
    return True


def stop_with_lock_lost(c, d, cluster, tmp, sock):
    """SIGTERM between two tries of taking a lock back, the OSD still
    paused: nothing to flush on that device (its flush would fail, EROFS),
    the daemon exits 0. A try running at that moment makes it exit 1 naming
    the take-back instead; an image close waiting for the OSD (librbd's
    watch) makes it exit 1 after the drain timeout, naming the close. It
    never waits for the OSD to come back."""
    lost = "taking the locks back failed: device retry"
    before = d.log().count(lost)
    try:
        fail_after_release(c, d, cluster, tmp, "stop with the lock lost", "the test's new process gives up", sock)
        c.check("stop with the lock lost: the take-back failed",
                wait_for(lambda: d.log().count(lost) > before, TIMEOUT * 4 + 10))
        status, took = sigterm_and_wait(d, DRAIN_TIMEOUT_S * 3 + 15)   # the first try is 1 s later
        log = d.log()
        between = status == 0 and "device retry: stopping without its lock" in log
        during = status == 1 and "device retry: the take-back of the lock of a failed hand-over still waits" in log
        closing = status == 1 and "closing the devices did not finish" in log
        c.check("stop with the lock lost, the OSD paused: it exits 0 without flushing that device (or 1 naming a "
                "try running, or the close)", between or during or closing,
                f"status {status} after {took:.1f} s" + (", a try was running" if during else "") +
                (", the close was given up" if closing else ""))
        if not (between or during or closing):
            d.print_log_tail(30)
    finally:
        cluster.signal_osd(signal.SIGCONT)


def handover_with_osd_paused(c, d, cluster, tmp):
    """`rbd resize` makes librbd refresh the image before its next flush,
    and that refresh waits for the OSD: the hand-over's flush hangs while the
    OSD is paused. The new process has a file device of its own (opening an
    image would wait for the OSD before it even asks)."""
    h = nbd.NBD()
    h.connect_uri(d.uri("waits"))
    h.pwrite(b"a" * 4096, 0, nbd.CMD_FLAG_FUA)
    cluster.rbd("resize", "--size", "96M", "rbd/img1")
    cluster.signal_osd(signal.SIGSTOP)
    try:
        takeover_fails(c, d, tmp, "new", "flush")
    finally:
        cluster.signal_osd(signal.SIGCONT)
    h.pwrite(b"b" * 4096, 4096, nbd.CMD_FLAG_FUA)
    c.check("once the OSD is back, the old daemon serves the client on",
            h.pread(8192, 0) == b"a" * 4096 + b"b" * 4096)
    h.shutdown()


def stop_with_osd_paused(c, d, cluster):
    """SIGTERM twice (stop without waiting for requests) while a write waits
    for the paused OSD: the final flush waits for that write, and must give
    up after the drain timeout (DRAIN_TIMEOUT_S) instead of keeping the daemon alive."""
    cluster.signal_osd(signal.SIGSTOP)
    try:
        child = subprocess.Popen([sys.executable, "-c", WRITE_ONE, d.uri("waits")],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1)
        d.send(signal.SIGTERM)
        time.sleep(0.5)
        d.send(signal.SIGTERM)
        sent = time.monotonic()
        try:
            status = d.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            status = None
        took = time.monotonic() - sent
        c.check("SIGTERM with the OSD paused: the daemon exits with status 1 once the final flush gives up",
                status == 1 and took < DRAIN_TIMEOUT_S * 3 + 15, f"status {status} after {took:.1f} s")
        c.check("it says which device's flush did not finish, and after the configured timeout",
                f"device waits: the flush at shutdown did not finish in {DRAIN_TIMEOUT_S * 1000} ms" in d.log())
        child.kill()
        child.wait()
    finally:
        cluster.signal_osd(signal.SIGCONT)


def main():
    fio.require_nbd_engine()
    c = Checks()
    tmp = TempDir("rbd-faults")
    try:
        with Cluster(tmp.path, ["img1:64M", "img2:64M", "img3:64M", "img4:64M", "img5:64M"]) as cluster:
            faults_daemon(c, cluster, tmp)
            take_back_with_osd_paused(c, cluster, tmp)
            take_back_retried(c, cluster, tmp)
            stop_idle_with_osd_paused(c, cluster, tmp)
    finally:
        tmp.remove()
    c.finish()


def stop_idle_with_osd_paused(c, cluster, tmp):
    """SIGTERM with nothing in flight and nothing to flush, the OSD paused,
    no osd_op_timeout: closing the image (librbd ends its watch and releases
    the lock) waits for the OSD, for ever without a bound. The daemon exits
    1 after the drain timeout, naming the close; once the OSD is back a plain
    restart gets the lock (the cluster drops the dead client's watch), says
    so while it waits (lock_wait_told), and the FUA write reads back."""
    cfg = (DRAIN_LIMITS + "devices:\n"
           f"  - {rbd_config('idle', 'img5', cluster.conf, rotational='false')}\n"
           "exports:\n  - {name: idle, device: idle}\n")
    with Daemon(cfg, "idle", workdir=tmp.path) as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("idle"))
        h.pwrite(b"i" * 4096, 0, nbd.CMD_FLAG_FUA)
        h.shutdown()
        cluster.signal_osd(signal.SIGSTOP)
        try:
            status, took = sigterm_and_wait(d, DRAIN_TIMEOUT_S * 3 + 10)
            c.check("stop with the OSD paused, nothing to flush: exits 1 after the drain timeout, not waiting for the "
                    "image's close", status == 1 and took < DRAIN_TIMEOUT_S * 3 + 5,
                    f"status {status} after {took:.1f} s")
            c.check("... naming the close",
                    "closing the devices did not finish in 2000 ms (storage not answering)" in d.log())
        finally:
            cluster.signal_osd(signal.SIGCONT)
    answered = cluster.wait_answering("img5")
    c.check("the cluster answers again after the pause", answered is not None,
            f"after {answered:.1f} s" if answered is not None else "no answer")
    # The dead client's lock goes with its watch (about 30 s on this cluster).
    # The test plays systemd's NOTIFY_SOCKET: the wait extends the start.
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(tmp.file("idle-notify.sock"))
    notify.setblocking(False)
    env = dict(os.environ, NOTIFY_SOCKET=tmp.file("idle-notify.sock"))
    try:
        with Daemon(cfg, "idle-again", workdir=tmp.path, ready_timeout=90, env=env) as d:
            h = nbd.NBD()
            h.connect_uri(d.uri("idle"))
            c.check("a plain restart once the OSD is back: the FUA write reads back", h.pread(4096, 0) == b"i" * 4096)
            h.pwrite(b"j" * 4096, 0, nbd.CMD_FLAG_FUA)
            c.check("... and it writes", h.pread(4096, 0) == b"j" * 4096)
            h.shutdown()
            lock_wait_told(c, d.log(), notify_messages(notify))
    finally:
        notify.close()


def notify_messages(sock):
    out = []
    while True:
        try:
            out.append(sock.recv(4096).decode())
        except BlockingIOError:
            return out


def lock_wait_told(c, log, messages):
    """The restart's wait for the dead client's lock: a warning before it
    (the holder named, the ~30 s and --break-lock said), the time it took
    once the lock came, both before the daemon is ready; systemd's start
    timeout extended meanwhile, its status naming the wait."""
    lines = log.splitlines()
    waiting = [i for i, line in enumerate(lines)
               if "[warning] device idle: rbd " in line and "img5: its lock is held by client." in line]
    c.check("the restart logs once, as a warning, that it waits for the dead client's lock",
            len(waiting) == 1, f"{len(waiting)} line(s)")
    line = lines[waiting[0]] if waiting else ""
    holder = re.search(r"held by (client\.\d+ at \S+?),", line)
    c.check("... naming the holder, the cluster dropping its watch (~30 s) and --break-lock",
            holder is not None and "drops its watch, about 30 s" in line and "--break-lock takes it at once" in line,
            line)
    got = [(i, re.search(r"got its lock after (\d+\.\d) s \(held by (.*)\)", line)) for i, line in enumerate(lines)
           if "[info] device idle: rbd " in line and "got its lock after" in line]
    ready = [i for i, line in enumerate(lines) if "nbdsched: ready" in line]
    c.check("once the lock comes: an info line with how long it took, after the warning and before ready",
            len(got) == 1 and got[0][1] is not None and bool(waiting) and waiting[0] < got[0][0] < (ready or [0])[0] and
            holder is not None and got[0][1].group(2) == holder.group(1),
            "; ".join(lines[i] for i, _ in got) or "no such line")
    if got and got[0][1]:
        print(f"restart: the dead client's lock came after {got[0][1].group(1)} s")
    extended = [i for i, m in enumerate(messages)
                if "EXTEND_TIMEOUT_USEC=60000000" in m.split("\n") and "waiting for its image's lock" in m]
    first_ready = next((i for i, m in enumerate(messages) if "READY=1" in m.split("\n")), len(messages))
    c.check("under systemd: the start timeout extended for the wait (EXTEND_TIMEOUT_USEC, STATUS) before READY=1",
            len(extended) == 1 and extended[0] < first_ready, repr(messages)[:300])


def faults_daemon(c, cluster, tmp):
    """The first daemon: fio through a pause, then the hand-over and stop phases on its devices."""
    with Daemon(config(cluster.conf), "faults", workdir=tmp.path,
                args=["--handover-socket", tmp.file("handover.sock")]) as d:
        job = {"ioengine": "nbd", "uri": d.uri("waits"), "rw": "randwrite", "bs": "4k", "iodepth": 8,
               "size": "32M", "time_based": True, "runtime": PAUSE + 4}
        with fio.start(job, [("writer", {})]) as running:
            time.sleep(2)
            before = counters(d)
            cluster.signal_osd(signal.SIGSTOP)
            paused = time.monotonic()
            child = subprocess.Popen([sys.executable, "-c", WRITE_ONE, d.uri("fails")],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            time.sleep(1.5)
            s1 = counters(d)
            time.sleep(2)
            s2 = counters(d)
            c.check("the stall shows in ctl stats: requests in flight, none completed in 2 s",
                    s2["in_flight"] > 0 and s2["requests"] == s1["requests"],
                    f"in_flight {s2['in_flight']}, completed {s1['requests']} -> {s2['requests']}")
            out = child.communicate(timeout=PAUSE + 20)[0]
            failed_after = time.monotonic() - paused
            c.check(f"osd_op_timeout {TIMEOUT}: the FUA write fails with EIO before the OSD is back",
                    child.returncode != 0 and "EIO" in out and failed_after < PAUSE,
                    f"{failed_after:.1f} s: {out.strip()[-120:]}")
            time.sleep(max(0.0, PAUSE - (time.monotonic() - paused)))
            cluster.signal_osd(signal.SIGCONT)
            result = running.finish(timeout=60)
        after = counters(d)
        write = result.jobs[0]["write"]
        worst = write["lat_ns"]["max"] / 1e9
        c.check("fio: no error through the pause", result.jobs[0]["error"] == 0)
        c.check("fio's worst latency shows the pause", worst > PAUSE - 2, f"{worst:.1f} s")
        c.check("writes went on after the pause", after["requests"] > s2["requests"] and after["errors"] == 0,
                f"completed {s2['requests']} -> {after['requests']}, errors {after['errors']}")
        print(f"fio: {write['iops']:.0f} IOPS over the run; device completed {before['requests']} before the pause")
        handover_release_with_osd_paused(c, d, cluster, tmp)
        handover_with_osd_paused(c, d, cluster, tmp)
        stop_with_osd_paused(c, d, cluster)
        if c.failed:
            d.print_log_tail()


if __name__ == "__main__":
    main()
