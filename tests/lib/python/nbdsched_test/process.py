"""A server as a child process: its output captured in a log file, ready
once it accepts connections on its Unix socket and/or TCP port, stopped with
a signal (then killed if it does not exit). CPU time comes from
/proc/PID/stat so that benchmarks can report CPU seconds per request."""
import atexit
import os
import signal
import socket
import subprocess
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _stat_fields(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def _children(pid):
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:   # the thread ended
            pass
    return out


def tree_cpu_seconds(pid):
    """CPU time of a process that forks one child per connection
    (nbd-server): its own, its reaped children's (cutime, cstime) and its
    live children's. Read again when a child was reaped while its time was
    being read, so that a child is counted exactly once."""
    while True:
        before = _stat_fields(pid)
        total = 0.0
        for child in _children(pid):
            try:
                f = _stat_fields(child)
            except OSError:   # reaped meanwhile: in the parent's cutime now
                continue
            total += sum(int(x) for x in f[11:15]) / CLK_TCK
        after = _stat_fields(pid)
        if after[13:15] == before[13:15]:
            return total + sum(int(x) for x in after[11:15]) / CLK_TCK


def thread_stats(pid):
    """{tid: (name, utime + stime in seconds, context switches)} of a
    process's threads (voluntary and involuntary switches together)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:   # the thread ended
            continue
        switches = int(status["voluntary_ctxt_switches"]) + int(status["nonvoluntary_ctxt_switches"])
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / CLK_TCK, switches)
    return out


def thread_cpu_seconds(pid):
    """{thread name: utime + stime in seconds} of a process, summed over
    the threads that share a name (librbd's msgr-worker-0..2 stay apart)."""
    out = {}
    for name, cpu, _ in thread_stats(pid).values():
        out[name] = out.get(name, 0.0) + cpu
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_all(procs, timeout=20):
    """SIGTERM to each of `procs` (subprocess.Popen) still running; killed
    if it has not exited within `timeout` s."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def wait_for(predicate, timeout, step=0.05):
    """True as soon as predicate() is; its last answer after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def run_bounded(cmd, timeout=30):
    """(returncode, output); a server that never answers makes libnbd and
    nbdinfo wait forever, so each client runs as a child with a deadline."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.returncode, (r.stdout + r.stderr).strip()
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout} s"


def _connectable(unix_paths, tcp_port):
    try:
        for path in unix_paths:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(path)
        if tcp_port:
            with socket.create_connection(("127.0.0.1", tcp_port), timeout=1):
                pass
        return True
    except OSError:
        return False


_started = []   # every Server this process started: none may outlive it


def kill_left_running():
    """At exit: kills each server started here and not stopped (a test that
    failed between a start and its stop), saying so."""
    for server in _started:
        if server.proc.poll() is None:
            sys.stderr.write(f"{server.name} (pid {server.pid}, log {server.log_path}) still running at exit: killed\n")
            server.stop(signal.SIGKILL)


atexit.register(kill_left_running)


class Server:
    """A running server. `listens` are the Unix socket paths it must accept
    on before the constructor returns (none: return at once, e.g. when
    socket activation starts it later); `tcp_port` likewise. `tls`: None,
    or (identity, psk_file) when it requires TLS with that pre-shared key
    (then uri() gives nbds:// URIs carrying the key file)."""

    tls = None

    def __init__(self, name, argv, workdir, log_path, sock=None, tcp_port=None, listens=None,
                 env=None, wait=True, timeout=30):
        self.name = name
        self.argv = argv
        self.sock = sock
        self.tcp_port = tcp_port
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=workdir, env=env)
        _started.append(self)
        if wait:
            self._wait_listening([p for p in (listens or [sock]) if p], tcp_port, timeout)

    def _wait_listening(self, unix_paths, tcp_port, timeout):
        ready = wait_for(lambda: self.proc.poll() is not None or _connectable(unix_paths, tcp_port),
                         timeout)
        if ready and self.proc.poll() is None:
            return
        why = (f"exited with status {self.proc.returncode}" if self.proc.poll() is not None
               else f"did not listen on {unix_paths or tcp_port} within {timeout} s")
        tail = self.log_tail()
        self.stop()
        raise RuntimeError(f"{self.name} {why}:\n{tail}")

    @property
    def pid(self):
        return self.proc.pid

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def uri(self, export="", transport="unix"):
        scheme, user, query = "nbd", "", []
        if self.tls:
            scheme, user, query = "nbds", f"{self.tls[0]}@", [f"tls-psk-file={self.tls[1]}"]
        if transport == "unix":
            return f"{scheme}+unix://{user}/{export}?" + "&".join([f"socket={self.sock}"] + query)
        return f"{scheme}://{user}127.0.0.1:{self.tcp_port}/{export}" + "".join("?" + q for q in query)

    def alive(self):
        return self.proc.poll() is None

    def send(self, sig):
        self.proc.send_signal(sig)

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError as e:
            return f"(no log: {e})\n"

    def log_tail(self, lines=30):
        return "".join(self.log().splitlines(keepends=True)[-lines:])

    def print_log_tail(self, lines=30):
        print(f"---- {self.name} log {self.log_path} (last {lines} lines) ----")
        sys.stdout.write(self.log_tail(lines))
        print("----")

    def wait_log(self, text, timeout=10, since=0):
        """True once `text` is in the log after its first `since` characters
        (len(log()) taken before an action: only what the action logged)."""
        return wait_for(lambda: text in self.log()[since:], timeout)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Sends `sig`, waits; the exit status, or a sentence saying it had
        to be killed (which compares unequal to every status)."""
        status = self.proc.poll()
        if status is None:
            self.proc.send_signal(sig)
            try:
                status = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                status = f"still running {timeout} s after signal {int(sig)} (killed)"
        self._log.close()
        return status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class _NotChild:
    """Popen's poll, wait, send_signal, terminate and kill for a process
    that is not this one's child (it forked into the background): it has
    ended once its pid is gone or a zombie; its exit status is unknown."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                if _stat_fields(self.pid)[0] == "Z":
                    self.returncode = "unknown (not a child of this process)"
            except OSError:
                self.returncode = "unknown (not a child of this process)"
        return self.returncode

    def send_signal(self, sig):
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout=None):
        if not wait_for(lambda: self.poll() is not None, 1e9 if timeout is None else timeout):
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
        return self.returncode


class DaemonizedServer(Server):
    """A server that forks into the background and writes its pid to
    `pid_file` (nbd-server: its one foreground mode serves a single
    connection and exits). The command must exit 0 once the daemon runs;
    from then on the daemon is followed by its pid, and its CPU time
    includes the children it forks per connection."""

    def __init__(self, name, argv, workdir, log_path, pid_file, sock=None, tcp_port=None, timeout=30):
        super().__init__(name, argv, workdir, log_path, sock=sock, tcp_port=tcp_port, wait=False)
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            status = "still running"
        pid = None
        if status == 0 and wait_for(lambda: _read_pid(pid_file), timeout):
            pid = _read_pid(pid_file)
        if pid is None:
            tail = self.log_tail()
            self.stop()
            raise RuntimeError(f"{name} did not start (command status {status}, pid file {pid_file}):\n{tail}")
        self.proc = _NotChild(pid)
        self._wait_listening([sock] if sock else [], tcp_port, timeout)

    def cpu(self):
        return tree_cpu_seconds(self.pid)


def _read_pid(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def rss_bytes(pid):
    """A process's resident set (VmRSS) in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) << 10
    raise AssertionError(f"no VmRSS for pid {pid}")
