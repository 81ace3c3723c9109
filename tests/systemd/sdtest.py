"""Helpers shared by the systemd integration tests: a temporary directory,
a minimal daemon configuration, waiting for things with a deadline, and a
verdict that says what failed."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


class Checks:
    """Collects named checks; exit status 1 if any failed."""

    def __init__(self):
        self.failed = []

    def check(self, name, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f" ({detail})" if detail else ""))
        if not ok:
            self.failed.append(name)
        return ok

    def finish(self):
        if self.failed:
            print(f"{len(self.failed)} check(s) failed: {', '.join(self.failed)}")
            sys.exit(1)
        print("all checks passed")
        sys.exit(0)


class TempDir:
    def __init__(self, tag):
        self.path = tempfile.mkdtemp(prefix=f"nbdsched-{tag}.")

    def __call__(self, name):
        return os.path.join(self.path, name)

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)


def write_config(path, unix_path, size="64MiB"):
    """One RAM export named 'default', listening on a unix socket only."""
    with open(path, "w") as f:
        f.write(f"""listen:
  - unix: {unix_path}
devices:
  - name: d0
    backend: ram
    size: {size}
exports:
  - name: default
    device: d0
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def daemon_log(path, lines=30):
    try:
        with open(path) as f:
            tail = f.readlines()[-lines:]
    except OSError:
        return
    print(f"---- daemon log {path} (last {lines} lines) ----")
    sys.stdout.write("".join(tail))
    print("----")


def sigterm_status(proc, timeout=20):
    """SIGTERM, then the exit status (or "still running" after timeout)."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return "still running"


def wrap_up(proc, log, checks, tmp):
    """Kill what is left, show the daemon log on failure, clean up, exit."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()
    if checks.failed:
        daemon_log(log.name)
    tmp.remove()
    checks.finish()


def run_bounded(cmd, timeout=30):
    """(returncode, output); a daemon that never answers makes libnbd and
    nbdinfo wait forever, so each client runs as a child with a deadline."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.returncode, (r.stdout + r.stderr).strip()
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout} s"
