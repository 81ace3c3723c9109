"""The real nbdsched daemon on a configuration, and its ctl client.

Daemon(config) writes the configuration into a directory (its own, or the
TempDir passed as `tmp`), starts $NBDSCHED on it and waits until it accepts
connections. `config` is YAML text ("{dir}" in it stands for the
directory) or a dict (written as JSON, which YAML reads). Unless the
configuration has its own `listen`, the daemon listens on `<tag>.sock` in the
directory (and, with tcp=True, on a free loopback port) and, with
control=True, serves its control socket `<tag>-ctl.sock` there.
"""
import json
import os
import signal
import subprocess
import sys

from .process import Server, free_port
from .tempdir import TempDir
from .verdict import skip

# The drain timeout tests that wait it out configure (limits.drain_timeout,
# default 10 s, put in their config with DRAIN_LIMITS): draining
# connections, a hand-over's parking and its flush, the final flush and the
# wait for the I/O pool at exit are each bounded by it. The daemon logs it in
# ms ("did not finish within 2000 ms").
DRAIN_TIMEOUT_S = 2
DRAIN_LIMITS = f"limits: {{drain_timeout: {DRAIN_TIMEOUT_S}s}}\n"


def nbdsched_binary():
    """$NBDSCHED as an absolute path; a test without it skips."""
    path = os.environ.get("NBDSCHED", "build/daemon/nbdsched")
    if not path or not os.access(path, os.X_OK):
        skip(f"no nbdsched executable at '{path}' (set NBDSCHED, e.g. NBDSCHED=build/daemon/nbdsched)")
    return os.path.abspath(path)


def one_ram_export(size="64MiB"):
    """The smallest useful configuration: one RAM export named `default`."""
    return f"""devices:
  - name: d0
    backend: ram
    size: {size}
exports:
  - name: default
    device: d0
"""


class Daemon(Server):
    """`workdir`: where its files go (default: a TempDir of its own, removed
    when it stops); `binary`: the executable (default $NBDSCHED);
    `wrapper`: argv put in front of it (systemd-socket-activate);
    `wait=False` returns at once; `listen_options`: more keys for each of
    its own listeners (e.g. {"tls": "require"}); `args`: more command-line
    arguments (e.g. ["--break-lock"])."""

    def __init__(self, config, tag="nbdsched", workdir=None, tcp=False, control=True, env=None,
                 binary=None, wrapper=(), wait=True, listen_options=None, args=(), ready_timeout=30):
        self.binary = os.path.abspath(binary) if binary else nbdsched_binary()
        self._own_tmp = TempDir(tag) if workdir is None else None
        self.dir = workdir or self._own_tmp.path
        self.config_path = self.file(f"{tag}.yaml")
        self.control = self.file(f"{tag}-ctl.sock") if control else None
        own_listen = "listen" not in config if isinstance(config, dict) else "listen:" not in config
        self.sock = self.file(f"{tag}.sock") if own_listen else None
        self.tcp_port = free_port() if own_listen and tcp else None
        self.listen_options = listen_options or {}
        self.write_config(config)
        argv = [*wrapper, self.binary, "--config", self.config_path, *args]
        try:
            super().__init__("nbdsched", argv, self.dir, self.file(f"{tag}.log"), sock=self.sock,
                             tcp_port=self.tcp_port, listens=[self.sock, self.control], env=env,
                             wait=wait, timeout=ready_timeout)
        except BaseException:
            self._remove_tmp()
            raise

    def file(self, name):
        return os.path.join(self.dir, name)

    def write_config(self, config):
        """Writes `config` atomically (a SIGHUP may read it at any time),
        with the daemon's own listen and control addresses where it has
        none."""
        if isinstance(config, dict):
            head = {"listen": self._listen()} if "listen" not in config else {}
            if self.control and "control" not in config:
                head["control"] = self.control
            text = json.dumps({**head, **config}, indent=1)
        else:
            text = config.replace("{dir}", self.dir)
            if self.control and "control:" not in text:
                text = f"control: {self.control}\n" + text
            if "listen:" not in text:
                text = f"listen: {json.dumps(self._listen())}\n" + text
        with open(self.config_path + ".tmp", "w") as f:
            f.write(text)
        os.replace(self.config_path + ".tmp", self.config_path)

    def _listen(self):
        entries = [{"unix": self.sock}] + ([{"tcp": f"127.0.0.1:{self.tcp_port}"}] if self.tcp_port else [])
        return [{**e, **self.listen_options} for e in entries]

    def hup(self):
        self.send(signal.SIGHUP)

    def ctl(self, *args, expect=0):
        """Runs `nbdsched ctl`; its stdout, or its stderr when a failure
        (exit status `expect`) is what the caller wants."""
        r = subprocess.run([self.binary, "ctl", "--socket", self.control, *args],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != expect:
            raise AssertionError(f"ctl {' '.join(args)}: exit {r.returncode} (expected {expect}):"
                                 f"\n{r.stdout}{r.stderr}")
        return r.stdout if expect == 0 else r.stderr

    def stats(self):
        return json.loads(self.ctl("stats", "--json"))

    def listing(self):
        return json.loads(self.ctl("list", "--json"))

    @staticmethod
    def device(stats, name):
        return next(d for d in stats["devices"] if d["name"] == name)

    @staticmethod
    def group(device_stats, name):
        return next(g for g in device_stats["groups"] if g["name"] == name)

    def _remove_tmp(self):
        if self._own_tmp:
            self._own_tmp.remove()

    def stop(self, sig=signal.SIGTERM, timeout=20):
        status = super().stop(sig, timeout)
        self._remove_tmp()
        return status

    def __exit__(self, *exc):
        if exc[0] is not None:
            sys.stderr.write(f"--- daemon log {self.log_path} ---\n{self.log()}")
        self.stop()
