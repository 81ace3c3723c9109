"""Start and stop the NBD servers the benchmarks talk to: nbdsched (from a
config dict), nbdkit memory and qemu-nbd. Every server listens on a Unix
socket in the run's scratch directory and, when asked, on TCP loopback.
Server CPU time is read from /proc/PID/stat so that a run can report CPU
seconds per request."""

import json
import os
import shutil
import socket
import subprocess
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_connectable(proc, sock_path, tcp_port, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before listening")
        try:
            if sock_path:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(sock_path)
            if tcp_port:
                with socket.create_connection(("127.0.0.1", tcp_port), timeout=1):
                    pass
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {sock_path or tcp_port} within {timeout}s")


class Server:
    """A running server. `uri(export, transport)` gives the fio/libnbd URI."""

    def __init__(self, name, argv, workdir, sock, tcp_port, log_path, env=None):
        self.name = name
        self.argv = argv
        self.sock = sock
        self.tcp_port = tcp_port
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=workdir, env=env)
        try:
            _wait_connectable(self.proc, sock, tcp_port, name)
        except Exception:
            self.stop()
            raise

    @property
    def pid(self):
        return self.proc.pid

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def uri(self, export="", transport="unix"):
        if transport == "unix":
            return f"nbd+unix:///{export}?socket={self.sock}"
        return f"nbd://127.0.0.1:{self.tcp_port}/{export}"

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def nbdsched_binary():
    path = os.environ.get("NBDSCHED", "build/daemon/nbdsched")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"bench: no nbdsched at {path} (set NBDSCHED=..., e.g. build-bench/daemon/nbdsched)")
    return os.path.abspath(path)


def start_nbdsched(workdir, tag, devices, exports, groups=None, tcp=False, log_level="warn", limits=None):
    """devices/exports/groups are lists of dicts in the configuration's
    schema. YAML is a superset of JSON, so the file is written as JSON."""
    sock = os.path.join(workdir, f"{tag}.sock")
    port = free_port() if tcp else None
    listen = [{"unix": sock}] + ([{"tcp": f"127.0.0.1:{port}"}] if tcp else [])
    cfg = {"listen": listen, "devices": devices, "exports": exports, "log_level": log_level}
    if groups:
        cfg["groups"] = groups
    if limits:
        cfg["limits"] = limits
    cfg_path = os.path.join(workdir, f"{tag}.yaml")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=1)
    argv = [nbdsched_binary(), "--config", cfg_path]
    srv = Server("nbdsched", argv, workdir, sock, port, os.path.join(workdir, f"{tag}.log"))
    srv.config_path = cfg_path
    srv.config = cfg
    return srv


def start_nbdkit_memory(workdir, tag, size="1G", transport="unix"):
    """nbdkit's memory plugin (sparse RAM, default 16 worker threads). nbdkit
    serves either a Unix socket or TCP, so each transport is its own process."""
    argv = ["nbdkit", "-f", "--exit-with-parent"]
    sock = port = None
    if transport == "unix":
        sock = os.path.join(workdir, f"{tag}.sock")
        argv += ["-U", sock]
    else:
        port = free_port()
        argv += ["-i", "127.0.0.1", "-p", str(port)]
    argv += ["memory", size]
    return Server("nbdkit", argv, workdir, sock, port, os.path.join(workdir, f"{tag}.log"))


def start_nbdkit_file(workdir, tag, image):
    """nbdkit's file plugin (a thread pool, 16 threads by default), Unix socket."""
    sock = os.path.join(workdir, f"{tag}.sock")
    argv = ["nbdkit", "-f", "--exit-with-parent", "-U", sock, "-e", "x", "file", image]
    return Server("nbdkit", argv, workdir, sock, None, os.path.join(workdir, f"{tag}.log"))


def start_qemu_nbd(workdir, tag, image, transport="unix", shared=64, extra=()):
    """qemu-nbd on a raw image; one address per process. extra: more options
    (--aio=..., --cache=...)."""
    argv = ["qemu-nbd", "--persistent", f"--shared={shared}", "-f", "raw", "-x", "x", *extra]
    sock = port = None
    if transport == "unix":
        sock = os.path.join(workdir, f"{tag}.sock")
        argv += ["-k", sock]
    else:
        port = free_port()
        argv += ["-b", "127.0.0.1", "-p", str(port)]
    argv.append(image)
    return Server("qemu-nbd", argv, workdir, sock, port, os.path.join(workdir, f"{tag}.log"))


def have(tool):
    return shutil.which(tool) is not None
