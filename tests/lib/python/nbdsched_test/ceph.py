"""A throwaway Ceph cluster (tests/ceph/cluster.sh) for the RBD tests and
bench/exp12: `with Cluster(tmp, images) as c:` starts one monitor and one
OSD, c.conf is its ceph.conf, c.rbd(...) runs the rbd tool on it, and the
daemons are stopped at the end. Where Ceph cannot start (packages missing,
a monitor that does not come up) the test SKIPs with the reason."""
import os
import signal
import subprocess
import time

from .handover import connect_handover, handover_message, handover_reply
from .process import wait_for
from .tempdir import TempDir
from .verdict import Checks, skip

SCRIPT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "ceph", "cluster.sh"))


def rbd_config(name, image, conf, **keys):
    """A devices[] entry for backend: rbd, as YAML flow text."""
    extra = "".join(f", {k}: {v}" for k, v in keys.items())
    return f"{{name: {name}, backend: rbd, pool: rbd, image: {image}, ceph_conf: {conf}, client: admin{extra}}}"


def conf_with(conf, line, tag):
    """A copy of ceph.conf `conf` (at `conf`.`tag`) with `line` at the top of its [client] section."""
    path = f"{conf}.{tag}"
    with open(conf) as f:
        text = f.read()
    assert "\n[client]\n" in text, "no [client] section"
    with open(path, "w") as f:
        f.write(text.replace("\n[client]\n", f"\n[client]\n{line}\n", 1))
    return path


def one_rbd_export(conf, image):
    """A configuration with one rbd device `vol` on `image`, exported as `vol`."""
    return f"devices:\n  - {rbd_config('vol', image, conf)}\nexports:\n  - {{name: vol, device: vol}}\n"


def completed_within(h, cookie, seconds):
    """True once `cookie`'s command on the libnbd handle `h` completed
    (raises on an error reply), False after `seconds`: a request waiting
    for a paused OSD, or a daemon that does not answer, must not hang the
    test."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        h.poll(100)
        if h.aio_command_completed(cookie):
            return True
    return False


def all_threads_stopped(pid):
    """Every thread of `pid` is in the stopped state (T), or it is gone."""
    tasks = f"/proc/{pid}/task"
    try:
        tids = os.listdir(tasks)
    except FileNotFoundError:
        return True   # exited
    for tid in tids:
        try:
            with open(f"{tasks}/{tid}/stat") as f:
                # The state follows the command's closing parenthesis.
                if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
                    return False
        except (FileNotFoundError, ProcessLookupError):
            continue   # that thread ended
    return True


def run_checks(tag, *steps):
    """Runs each step(checks, cluster, tmp) on one cluster of its own (its
    files in a TempDir named `tag`), then exits with the verdict."""
    c = Checks()
    tmp = TempDir(tag)
    try:
        with Cluster(tmp.path, []) as cluster:
            try:
                for step in steps:
                    step(c, cluster, tmp)
            except BaseException:
                c.failed.append("exception")
                raise
    finally:
        tmp.remove()
    c.finish()


class Cluster:
    def __init__(self, workdir, images=("img1:256M",), extra_conf=""):
        # A start that failed once (seen under a loaded CI run, cause
        # unknown) is retried once in a fresh directory; the failure's
        # details and log tails are printed either way.
        for attempt in ("ceph", "ceph-retry"):
            self.dir = os.path.join(workdir, attempt)
            self.conf = os.path.join(self.dir, "ceph.conf")
            failure = self._start(images, extra_conf)
            if failure is None:
                break
            print(f"the test cluster did not start in {self.dir}: {failure}")
        else:
            said = [line for line in failure.splitlines() if line.startswith("cluster.sh:")] or failure.splitlines()
            skip(f"the test cluster did not start, twice (the last: {said[0]})")
        # cluster.sh starts the daemons in sessions of their own, so a test
        # killed by its timeout (meson kills the test's process group) would
        # leave them running: this watcher, in a session of its own too,
        # stops them once the test process is gone.
        self._reaper = subprocess.Popen(
            ["sh", "-c", 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" stop "$3"', "ceph-reaper",
             str(os.getpid()), SCRIPT, self.dir],
            start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _start(self, images, extra_conf):
        """Starts the cluster in self.dir: None, or why it did not start
        (its daemons stopped and its directory removed)."""
        env = dict(os.environ, CEPH_EXTRA_CONF=extra_conf)
        r = subprocess.run([SCRIPT, "start", self.dir, *images], capture_output=True, text=True, env=env,
                           timeout=120)
        if r.returncode == 77:
            skip(r.stdout.strip().removeprefix("SKIP: "))
        if r.returncode == 0:
            print(r.stdout.splitlines()[0])
            return None
        failure = f"{r.stderr.strip() or 'exit ' + str(r.returncode)}\n{self._log_tail()}"
        self.stop()
        return failure

    def _log_tail(self):
        out = ""
        for name in ("mon.a.out", "osd.0.out", "mon.a.log", "osd.0.log", "client.log", "cluster.log"):
            try:
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    out += f"--- {name}\n" + "".join(f.readlines()[-10:])
            except OSError:
                pass
        return out

    def env(self):
        return dict(os.environ, CEPH_CONF=self.conf)

    def rbd(self, *args, timeout=30):
        """Runs `rbd ARGS` on this cluster; its stdout (raises on failure)."""
        r = subprocess.run(["rbd", "-c", self.conf, *args], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise AssertionError(f"rbd {' '.join(args)}: exit {r.returncode}: {r.stderr}")
        return r.stdout

    def pids(self):
        """{"mon.a": pid, "osd.0": pid}, in start order (cluster.sh's pids file)."""
        with open(os.path.join(self.dir, "pids")) as f:
            return dict(zip(("mon.a", "osd.0"), (int(p) for p in f.read().split())))

    def signal_osd(self, sig=signal.SIGSTOP):
        """Sends `sig` to the OSD; a SIGSTOP returns once /proc shows every
        one of its threads stopped, and raises if they are not within 10 s.
        kill() only queues the stop and wakes one thread to take it; the
        others serve on until that thread has run: 4 ms after kill() on a
        loaded host, at times 13 (26 with the OSD at nice 19), and a read
        sent right after kill() can be answered "while paused" (once,
        ceph-rbd_faults saw its lock taken back 3 ms after the SIGSTOP)."""
        pid = self.pids()["osd.0"]
        os.kill(pid, sig)
        if sig == signal.SIGSTOP and not wait_for(lambda: all_threads_stopped(pid), 10, step=0.001):
            raise AssertionError(f"the OSD (pid {pid}) is not stopped 10 s after its SIGSTOP")

    def osd_alive(self):
        try:
            os.kill(self.pids()["osd.0"], 0)
            return True
        except OSError:
            return False

    def wait_answering(self, image, timeout=120):
        """Seconds until `rbd info` on `image` answers again (an OSD resumed
        after a long pause may take a while on a loaded host), or None: then
        the OSD's log tail is printed."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            try:
                self.rbd("info", f"rbd/{image}", timeout=10)
                return time.monotonic() - start
            except (AssertionError, subprocess.TimeoutExpired):
                time.sleep(0.5)
        print(f"the cluster did not answer within {timeout} s (OSD process alive: {self.osd_alive()})\n"
              + self._log_tail())
        return None

    def stop(self):
        reaper = getattr(self, "_reaper", None)
        if reaper:
            reaper.kill()
            reaper.wait()
        subprocess.run([SCRIPT, "stop", self.dir], timeout=60)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.signal_osd(signal.SIGCONT)   # a paused OSD cannot stop
        except (OSError, KeyError, ValueError):
            pass
        self.stop()


class LockThief:
    """A planned restart's new process that takes an image's lock and then
    fails without letting go of it, played with librbd's Python binding:
    asks the old daemon for the hand-over on `handover_path` (`ask`:
    "takeover" or "takeover force"), takes the lock, answers "failed".
    `reply` is the old daemon's answer to the ask ("state ..." when it
    handed over); write_error() tries a write through the thief."""

    def __init__(self, cluster, handover_path, image, ask="takeover"):
        import rados
        import rbd
        sock = connect_handover(handover_path)
        handover_message(sock, ask)
        self.reply = handover_reply(sock)
        self.cluster = rados.Rados(conffile=cluster.conf)
        self.cluster.connect()
        self.image = rbd.Image(self.cluster.open_ioctx("rbd"), image)
        self.image.lock_acquire(rbd.RBD_LOCK_MODE_EXCLUSIVE)
        handover_message(sock, "failed played by the test: it keeps the lock")
        sock.close()

    def write_error(self, offset):
        """Why a 4 KiB write and flush at `offset` failed ("" when they went through)."""
        import rados
        import rbd
        try:
            self.image.write(b"x" * 4096, offset)
            self.image.flush()
            return ""
        except (rbd.Error, rados.Error) as e:
            return str(e)

    def close(self):
        import rados
        import rbd
        try:
            self.image.close()
            self.cluster.shutdown()
        except (rbd.Error, rados.Error):
            pass
