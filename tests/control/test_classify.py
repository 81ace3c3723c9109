"""Classification rules: a unix-socket client lands in the group of the first
matching rule -- by its cgroup (a cgroup v2 directory this test creates), its
uid, a supplementary gid, or the export name -- else in the export's group,
else the device's default group. Checked through `ctl list --json` while the client is connected.
"""
import os
import subprocess
import sys
import time

from nbdsched_test.cgroups import cgroup2_root
from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import check

CLIENT = r"""
import nbd, sys, time
h = nbd.NBD()
h.connect_uri(sys.argv[1])
h.pread(4096, 0)
print("connected", flush=True)
sys.stdin.readline()
"""


class Client:
    """A libnbd client process, optionally started inside a cgroup."""

    def __init__(self, uri, cgroup_dir=None, uid=None, groups=None):
        def pre():
            if cgroup_dir:
                with open(os.path.join(cgroup_dir, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            if groups is not None:
                os.setgroups(groups)
            if uid is not None:
                os.setgid(uid)
                os.setuid(uid)
        self.p = subprocess.Popen(["/usr/bin/python3", "-c", CLIENT, uri], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, preexec_fn=pre)
        line = self.p.stdout.readline()
        if "connected" not in line:
            raise RuntimeError(f"client did not connect: {line!r}")

    def close(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        self.p.wait(timeout=10)


def queue_groups(d):
    dev = next(x for x in d.listing()["devices"] if x["name"] == "d0")
    return [(q["export"], q["group"], q["peer"]) for q in dev["queues"]]


def main():
    root = cgroup2_root()
    cg_rel = f"/nbdsched-test-{os.getpid()}"
    cg_dir = None
    if root:
        try:
            os.mkdir(root + cg_rel)
            cg_dir = root + cg_rel
        except OSError as e:
            print(f"note: cannot create a cgroup under {root}: {e}")
    config = f"""
devices:
  - {{name: d0, backend: ram, size: 64MiB, scheduler: bfq, default_group: fallback}}
exports:
  - {{name: plain, device: d0, size: 16MiB}}
  - {{name: grouped, device: d0, offset: 16MiB, size: 16MiB, group: exportgroup}}
  - {{name: scratch, device: d0, offset: 32MiB}}
groups:
  - {{name: fallback, weight: 50}}
  - {{name: exportgroup, weight: 200}}
  - {{name: cg, weight: from-cgroup}}
  - {{name: nobody, weight: 300}}
  - {{name: scratchers, weight: 400}}
  - {{name: suppl, weight: 500}}
rules:
  - {{match: {{gid: 4321}}, group: suppl}}
  - {{match: {{cgroup: {cg_rel}}}, group: cg}}
  - {{match: {{uid: 65534}}, group: nobody}}
  - {{match: {{export: scratch}}, group: scratchers}}
"""
    try:
        with Daemon(config, "classify") as d:
            # let the uid-65534 client reach the NBD socket (not the control socket)
            os.chmod(d.dir, 0o755)
            os.chmod(d.sock, 0o777)
            c = Client(d.uri("plain"))
            check(queue_groups(d)[0][:2] == ("plain", "fallback"), "no rule, no export group: device default")
            c.close()
            c = Client(d.uri("grouped"))
            check(queue_groups(d)[0][:2] == ("grouped", "exportgroup"), "the export's group")
            c.close()
            c = Client(d.uri("scratch"))
            check(queue_groups(d)[0][:2] == ("scratch", "scratchers"), "export rule")
            c.close()
            c = Client(d.uri("plain"), uid=65534)
            got = queue_groups(d)[0]
            check(got[:2] == ("plain", "nobody") and "uid 65534" in got[2], f"uid rule: {got}")
            c.close()
            c = Client(d.uri("plain"), uid=65534, groups=[4321])
            got = queue_groups(d)[0]
            check(got[:2] == ("plain", "suppl"), f"gid rule by a supplementary group (as allow: gid): {got}")
            c.close()
            if cg_dir is None:
                print("SKIP: cgroup rule: no writable cgroup v2 hierarchy here (uid/export rules passed)")
                return 77
            w = os.path.join(cg_dir, "io.weight")
            weight_file = os.path.exists(w)
            if weight_file:
                try:
                    with open(w, "w") as f:
                        f.write("default 700")
                except OSError:
                    weight_file = False
            c = Client(d.uri("grouped"), cgroup_dir=cg_dir)
            got = queue_groups(d)[0]
            check(got[:2] == ("grouped", "cg") and cg_rel in got[2], f"cgroup rule beats the export's group: {got}")
            cg_weight = next(g for g in d.listing()["groups"] if g["name"] == "cg")["weight"]
            if weight_file:
                check(cg_weight == 700, f"weight: from-cgroup took io.weight 700 ({cg_weight})")
            else:
                print("note: io.weight not available in the test cgroup; from-cgroup weight not checked")
            c.close()
            # the dissolved queue's requests stay counted for its group
            dev = d.device(d.stats(), "d0")
            check(d.group(dev, "cg")["counters"]["reads"] == 1, "the cgroup client's read counted for cg")
    finally:
        if cg_dir:
            for _ in range(50):
                try:
                    os.rmdir(cg_dir)
                    break
                except OSError:
                    time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
