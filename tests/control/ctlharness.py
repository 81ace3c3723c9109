"""The real nbdsched daemon with a control socket, for the tests in tests/control.

Daemon(config_yaml) writes the config into a private directory (the strings
{dir} in it are replaced), starts $NBDSCHED on it and waits for both the NBD
and the control socket. ctl(...) runs `nbdsched ctl` and returns its stdout;
stats()/lst() parse `--json`.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

NBDSCHED = os.environ.get("NBDSCHED", "")


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


class Daemon:
    def __init__(self, config, name="d"):
        if not NBDSCHED or not os.access(NBDSCHED, os.X_OK):
            skip("$NBDSCHED is not set to the nbdsched executable")
        self.dir = tempfile.mkdtemp(prefix=f"nbdsched-ctl-{name}-")
        self.sock = os.path.join(self.dir, "nbd.sock")
        self.control = os.path.join(self.dir, "ctl.sock")
        self.config_path = os.path.join(self.dir, "config.yaml")
        self.write_config(config)
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen([NBDSCHED, "--config", self.config_path],
                                     stdout=self.log_file, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not (os.path.exists(self.sock) and os.path.exists(self.control)):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("daemon did not start:\n" + self.log())
            time.sleep(0.05)

    def write_config(self, config):
        text = config.replace("{dir}", self.dir)
        if "listen:" not in text:
            text = f"listen: [{{unix: {self.dir}/nbd.sock}}]\ncontrol: {self.dir}/ctl.sock\n" + text
        with open(self.config_path + ".tmp", "w") as f:
            f.write(text)
        os.replace(self.config_path + ".tmp", self.config_path)

    def uri(self, export):
        return f"nbd+unix:///{export}?socket={self.sock}"

    def ctl(self, *args, expect=0):
        r = subprocess.run([NBDSCHED, "ctl", "--socket", self.control, *args],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != expect:
            raise AssertionError(f"ctl {' '.join(args)}: exit {r.returncode} (expected {expect}):"
                                 f"\n{r.stdout}{r.stderr}")
        return r.stdout if expect == 0 else r.stderr

    def stats(self):
        return json.loads(self.ctl("stats", "--json"))

    def lst(self):
        return json.loads(self.ctl("list", "--json"))

    def device(self, stats, name):
        return next(d for d in stats["devices"] if d["name"] == name)

    def group(self, device_stats, name):
        return next(g for g in device_stats["groups"] if g["name"] == name)

    def hup(self):
        self.proc.send_signal(signal.SIGHUP)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_log(self, text, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.log():
                return True
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        subprocess.run(["rm", "-rf", self.dir])
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            sys.stderr.write("--- daemon log ---\n" + self.log())
        self.stop()
