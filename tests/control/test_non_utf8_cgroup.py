"""A client in a cgroup whose name is not UTF-8 (anyone with a delegated
cgroup subtree can pick such a name) is classified as any other, and `ctl
list` (JSON and table) and `ctl stats` show its cgroup with the bad byte as "\\xff";
the daemon serves on. Then a planned restart (--takeover) passes the
connection: the old daemon exits 0, the new one serves it in the same group
and shows the same peer. Needs a writable cgroup v2 hierarchy; skips without.
"""
import os
import subprocess
import sys

from nbdsched_test.cgroups import cgroup2_root, remove_cgroup
from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check, skip

CLIENT = r"""
import nbd, sys
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pread(4096, 0)
print("connected", flush=True)
for line in sys.stdin:
    if not line.strip():
        break
    h.pread(4096, 8192)
    print("read", flush=True)
"""

CONFIG = """
devices:
  - {{name: d0, backend: ram, size: 16MiB, scheduler: bfq}}
exports:
  - {{name: e, device: d0}}
groups:
  - {{name: cg, weight: 300}}
rules:
  - {{match: {{cgroup: {parent}}}, group: cg}}
"""


def queues(d):
    return d.device(d.listing(), "d0")["queues"]


def answers(d):
    try:
        d.listing()
        return True
    except AssertionError:
        return False


def main():
    root = cgroup2_root()
    if root is None:
        skip("no cgroup v2 hierarchy (/sys/fs/cgroup or /sys/fs/cgroup/unified): cannot put a client "
             "in a cgroup whose name is not UTF-8")
    parent = f"/nbdsched-utf8-{os.getpid()}"
    child = os.fsencode(root + parent) + b"/t-\xff"
    try:
        os.mkdir(root + parent)
        os.mkdir(child)
    except OSError as e:
        remove_cgroup(root + parent)
        skip(f"cannot create cgroups under {root} ({e}): cannot put a client in a cgroup whose name is not UTF-8")
    client = None
    tmp = TempDir("cgutf8")
    handover = tmp.file("handover.sock")
    try:
        with Daemon(CONFIG.format(parent=parent), "cgutf8", workdir=tmp.path, args=["--handover-socket", handover]) as d:
            def enter():
                with open(child + b"/cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))
            client = subprocess.Popen(["/usr/bin/python3", "-c", CLIENT, d.uri("e")], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True, preexec_fn=enter)
            check(client.stdout.readline().strip() == "connected", "the client in the cgroup connected")
            q = queues(d)
            check(len(q) == 1 and q[0]["group"] == "cg", f"the cgroup rule still matches below {parent}: {q}")
            check(f"cgroup {parent}/t-\\xff" in q[0]["peer"], f"ctl list shows the bad byte as \\xff: {q[0]['peer']}")
            check(d.device(d.stats(), "d0")["queues"][0]["peer"] == q[0]["peer"], "ctl stats answers the same")
            check("t-\\xff" in d.ctl("list"), "the ctl list table shows it")
            check(d.alive(), "the daemon serves on")

            # A planned restart with that connection open.
            with open(os.path.join(d.dir, "new.log"), "w") as log:
                new = subprocess.Popen([d.binary, "--config", d.config_path, "--takeover", handover, "--force"],
                                       stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                try:
                    status = d.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    status = "still running"
                check(status == 0, f"the old daemon handed over and exited 0 ({status}):\n{d.log_tail()}")
                d.proc = new   # ctl() and listing() go to the new one's control socket (same path)
                check(wait_for(lambda: new.poll() is not None or answers(d), 10) and new.poll() is None,
                      "the new daemon serves its control socket")
                client.stdin.write("read\n")
                client.stdin.flush()
                check(client.stdout.readline().strip() == "read", "the connection reads through the new daemon")
                q2 = queues(d)
                check(len(q2) == 1 and q2[0]["group"] == "cg" and q2[0]["peer"] == q[0]["peer"],
                      f"the new daemon has the connection in cg with the same peer: {q2}")
            finally:
                if new.poll() is None:
                    new.terminate()
                    new.wait(20)
    finally:
        if client:
            try:
                client.stdin.close()
            except OSError:
                pass
            client.wait(10)
        remove_cgroup(child)
        remove_cgroup(root + parent)
        tmp.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
