"""A daemon in its own pid namespace (`unshare --pid --fork --mount-proc`, as
in a container or under systemd's PrivatePIDs=) sees pid 0 for a client
outside it. The client's uid and gids still come through SO_PEERCRED:
`allow:` rules by uid/gid admit it (and refuse it when they name someone
else), `rules:` by uid place it in their group, and the log names its uid.
Skips when this process may not create a pid namespace.
"""
import os
import signal
import subprocess
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for
from nbdsched_test.verdict import Checks, skip

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def inner_pid(outer):
    """The daemon itself: unshare's only child (unshare ignores SIGTERM)."""
    try:
        with open(f"/proc/{outer}/task/{outer}/children") as f:
            children = f.read().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def opens(d, export):
    h = nbd.NBD()
    try:
        h.connect_uri(f"nbd+unix:///{export}?socket={d.sock}")
    except nbd.Error as e:
        return str(e)
    return h


def main():
    try:
        r = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        skip("no unshare(1) (util-linux)")
    if r.returncode != 0:
        skip(f"cannot create a pid namespace here (unshare: {r.stderr.strip()})")
    uid, gid = os.getuid(), os.getgid()
    other = (uid + 4242) % 60000
    config = f"""
devices:
  - {{name: d0, backend: ram, size: 32MiB, scheduler: bfq}}
exports:
  - {{name: mine, device: d0, size: 8MiB, allow: [{{uid: {uid}}}]}}
  - {{name: mygroup, device: d0, offset: 8MiB, size: 8MiB, allow: [{{gid: {gid}}}]}}
  - {{name: theirs, device: d0, offset: 16MiB, size: 8MiB, allow: [{{uid: {other}}}]}}
groups:
  - {{name: byuid, weight: 300}}
rules:
  - {{match: {{uid: {uid}}}, group: byuid}}
"""
    c = Checks()
    with Daemon(config, "pidns", wrapper=UNSHARE) as d:
        c.check("the daemon runs in its own pid namespace",
                os.readlink(f"/proc/{inner_pid(d.pid) or 0}/ns/pid") != os.readlink("/proc/self/ns/pid"))
        h = opens(d, "mine")
        c.check(f"allow: [{{uid: {uid}}}] admits this client", not isinstance(h, str), h if isinstance(h, str) else "")
        if not isinstance(h, str):
            dev = next(x for x in d.listing()["devices"] if x["name"] == "d0")
            groups = [q["group"] for q in dev["queues"] if q["export"] == "mine"]
            c.check(f"rules: uid {uid} places it in group byuid", groups == ["byuid"], str(groups))
            h.shutdown()
        h = opens(d, "mygroup")
        c.check(f"allow: [{{gid: {gid}}}] admits this client", not isinstance(h, str), h if isinstance(h, str) else "")
        if not isinstance(h, str):
            h.shutdown()
        h = opens(d, "theirs")
        c.check(f"allow: [{{uid: {other}}}] refuses it", isinstance(h, str))
        c.check("the refusal names the client's uid and gid",
                f"export 'theirs' refused: unix uid {uid} gid {gid} matches none" in d.log(), d.log_tail(3))
        inner = inner_pid(d.pid)
        if inner:
            os.kill(inner, signal.SIGTERM)
            wait_for(lambda: not d.alive(), 20)
        c.check("clean stop", d.stop() == 0)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
