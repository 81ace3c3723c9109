"""`nbdsched ctl` changes across planned restarts (--takeover), twice: a
change is kept where the new process's file gives what the old one's did,
and the new file wins where it changed that value -- what a SIGHUP of that
file would do. The first daemon's file gives group a weight 100, b 200, d0
slice_idle 8ms, and d0 a fault that fails every read of its first block;
ctl sets a 500, b 700, slice_idle 0, quantum 2 and faults off. The second
file changes b (300) and quantum (16). Checked on the second and on a third
process (the second's own hand-over): a 500, b 300, slice_idle 0, quantum
16, and reads of the first block succeed (faults still off). Before, every
ctl change was undone: a 100, slice_idle 8ms, and reads failed again.
"""
import json
import os

import nbd

from nbdsched_test.handover import Generations, ctl_at
from nbdsched_test.process import wait_for
from nbdsched_test.verdict import Checks

CONFIG = """
listen: [{{unix: {dir}/nbd.sock}}]
control: {dir}/ctl.sock
groups: [{{name: a, weight: 100}}, {{name: b, weight: {b}}}]
devices:
  - name: d0
    backend: file
    path: {dir}/d0.img
    size: 16MiB
    scheduler: cfq
    tunables: {{slice_idle: 8ms{quantum}}}
    faults: [{{op: read, error: EIO, offset: 0, length: 4KiB}}]
exports: [{{name: e0, device: d0, group: a}}]
"""


def ctl(tmp, *args):
    return ctl_at(tmp.file("ctl.sock"), *args)


def weights(tmp):
    return {g["name"]: g["weight"] for g in json.loads(ctl(tmp, "list", "--json"))["groups"]}


def first_block_reads(sock):
    h = nbd.NBD()
    h.connect_uri(f"nbd+unix:///e0?socket={sock}")
    try:
        h.pread(4096, 0)
        return True
    except nbd.Error as e:
        print(f"read of the first block: {e}")
        return False
    finally:
        h.shutdown()


def check_carried(checks, tmp, tag, sock):
    w = weights(tmp)
    checks.check(f"{tag}: group a keeps ctl's weight 500 (its file weight is unchanged)", w.get("a") == 500, f"{w}")
    checks.check(f"{tag}: group b has the new file's weight 300 (the file changed it)", w.get("b") == 300, f"{w}")
    idle = ctl(tmp, "get", "d0", "slice_idle").strip()
    checks.check(f"{tag}: d0 slice_idle keeps ctl's 0", idle in ("0", "0ns", "0ms"), idle)
    quantum = ctl(tmp, "get", "d0", "quantum").strip()
    checks.check(f"{tag}: d0 quantum has the new file's 16", quantum == "16", quantum)
    checks.check(f"{tag}: d0's faults stay off", first_block_reads(sock))


def main():
    checks = Checks()
    with Generations("takeover-ctl-changes") as g:
        tmp = g.tmp
        with open(tmp.file("d0.img"), "wb") as f:
            f.truncate(16 << 20)
        sock, handover = tmp.file("nbd.sock"), tmp.file("handover.sock")
        old = g.start("old", CONFIG.format(dir=tmp.path, b=200, quantum=""), ["--handover-socket", handover])
        checks.check("old daemon up", wait_for(lambda: os.path.exists(handover) and os.path.exists(sock), 10))
        checks.check("the configured fault fails a read of the first block", not first_block_reads(sock))
        for args in (["weight", "a", "500"], ["weight", "b", "700"], ["set", "d0", "slice_idle", "0"],
                     ["set", "d0", "quantum", "2"], ["faults", "d0", "off"]):
            ctl(tmp, *args)
        # A connection across the restarts, beside the settings.
        keep = nbd.NBD()
        keep.connect_uri(f"nbd+unix:///e0?socket={sock}")
        keep.pwrite(b"k" * 4096, 8192)

        changed = CONFIG.format(dir=tmp.path, b=300, quantum=", quantum: 16")
        mid = g.take_over(checks, "mid", changed, handover, old, "second")
        check_carried(checks, tmp, "second", sock)
        mid_log = g.log("mid")
        checks.check("the second daemon logs what it kept and what its file overrides",
                     "ctl weight a 500 kept" in mid_log and "ctl weight b 700 not kept" in mid_log
                     and "ctl set d0 quantum 2 not kept" in mid_log and "ctl faults d0 off kept" in mid_log)

        g.take_over(checks, "new", changed, handover, mid, "third")
        check_carried(checks, tmp, "third", sock)
        checks.check("the connection open across both restarts reads its data", keep.pread(4096, 8192) == b"k" * 4096)
        g.print_logs_if_failed(checks, "mid", "new")
    checks.finish()


if __name__ == "__main__":
    main()
