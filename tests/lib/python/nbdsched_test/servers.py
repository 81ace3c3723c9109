"""The NBD servers the benchmarks compare: nbdsched (from configuration
dicts), nbdkit (memory, file), qemu-nbd and nbd-server. Every server
listens on a Unix socket in the run's scratch directory and, when asked, on
TCP loopback; nbdkit, qemu-nbd and nbd-server serve one address per process."""
import os

from .daemon import Daemon
from .process import DaemonizedServer, Server, free_port


def start_nbdsched(workdir, tag, devices, exports, groups=None, tcp=False, log_level="warn", limits=None,
                   tls_psk=None, control=False):
    """devices/exports/groups are lists of dicts in the configuration's
    schema; `config` on the result is the dict as written (for reports).
    tls_psk: (identity, psk_file): its listeners require TLS with that key.
    control: give it a control socket (srv.stats() reads its counters)."""
    cfg = {"devices": devices, "exports": exports, "log_level": log_level}
    if groups:
        cfg["groups"] = groups
    if limits:
        cfg["limits"] = limits
    if tls_psk:
        cfg["tls"] = {"psk_file": tls_psk[1]}
    srv = Daemon(cfg, tag, workdir=workdir, tcp=tcp, control=control,
                 listen_options={"tls": "require"} if tls_psk else None)
    srv.config = {"listen": srv._listen(), **cfg}
    srv.tls = tls_psk
    return srv


def _peer(name, argv, workdir, tag, transport, unix_args, tcp_args, image=()):
    """nbdkit or qemu-nbd on one address: `unix_args(sock)` or `tcp_args(port)`."""
    sock = port = None
    if transport == "unix":
        sock = os.path.join(workdir, f"{tag}.sock")
        argv += unix_args(sock)
    else:
        port = free_port()
        argv += tcp_args(port)
    return Server(name, argv + list(image), workdir, os.path.join(workdir, f"{tag}.log"), sock=sock,
                  tcp_port=port)


def start_nbdkit_memory(workdir, tag, size="1G", transport="unix", tls_psk=None, threads=None):
    """nbdkit's memory plugin (sparse RAM, default 16 worker threads;
    `threads`: --threads N). tls_psk: (identity, psk_file): --tls=require
    with that key file."""
    tls = ["--tls=require", f"--tls-psk={tls_psk[1]}"] if tls_psk else []
    tls += ["--threads", str(threads)] if threads else []
    srv = _peer("nbdkit", ["nbdkit", "-f", "--exit-with-parent", *tls], workdir, tag, transport,
                lambda s: ["-U", s], lambda p: ["-i", "127.0.0.1", "-p", str(p)], ["memory", size])
    srv.tls = tls_psk
    return srv


def start_nbdkit_file(workdir, tag, image):
    """nbdkit's file plugin (a thread pool, 16 threads by default), Unix socket."""
    return _peer("nbdkit", ["nbdkit", "-f", "--exit-with-parent"], workdir, tag, "unix",
                 lambda s: ["-U", s, "-e", "x"], None, ["file", image])


def start_qemu_nbd(workdir, tag, image, transport="unix", shared=64, extra=()):
    """qemu-nbd on a raw image. extra: more options (--aio=..., --cache=...)."""
    return _peer("qemu-nbd", ["qemu-nbd", "--persistent", f"--shared={shared}", "-f", "raw", "-x", "x",
                              *extra], workdir, tag, transport,
                 lambda s: ["-k", s], lambda p: ["-b", "127.0.0.1", "-p", str(p)], [image])


def start_nbd_server(workdir, tag, image, transport="unix"):
    """nbd-server (the reference server of the NBD project) exporting a raw
    image as `x`. It forks into the background and forks a process per
    connection; its CPU time counts them all. Its configuration file is
    written here, so the system's /etc/nbd-server/config is not read."""
    sock = port = None
    generic = ["[generic]"]
    if transport == "unix":
        sock = os.path.join(workdir, f"{tag}.sock")
        generic.append(f"unixsock = {sock}")
    else:
        port = free_port()
        generic += ["listenaddr = 127.0.0.1", f"port = {port}"]
    config = os.path.join(workdir, f"{tag}.conf")
    with open(config, "w") as f:
        f.write("\n".join(generic + ["[x]", f"exportname = {image}", "flush = true", "trim = true", ""]))
    pid_file = os.path.join(workdir, f"{tag}.pid")
    return DaemonizedServer("nbd-server", ["nbd-server", "-C", config, "-p", pid_file], workdir,
                            os.path.join(workdir, f"{tag}.log"), pid_file, sock=sock, tcp_port=port)


class Fleet(dict):
    """label -> running server. As a context manager it stops them all at
    the end and, when the run itself went well, fails if one died in it."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *_):
        try:
            dead = [f"{label} died during the run; see its log {s.log_path}"
                    for label, s in self.items() if not s.alive()]
            if exc_type is None and dead:
                raise RuntimeError("; ".join(dead))
        finally:
            for s in self.values():
                s.stop()
