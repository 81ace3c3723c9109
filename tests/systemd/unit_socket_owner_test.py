#!/usr/bin/python3
"""`listen:` `owner:`/`group:`/`mode:` with no more capabilities than the
system unit keeps: the daemon runs as root under setpriv with the bounding
set read from the configured nbdsched.service (CapabilityBoundingSet=), as
systemd would start it. It must start, the socket files must have the
asked owner, group and mode, and nobody (uid/gid 65534) must connect
through them. The unit's system-call filter (@chown) is not applied here;
the VM test vm_systemd_units runs the same under systemd itself.

usage: unit_socket_owner_test.py UNIT_FILE NBDSCHED"""
import os
import shutil
import stat
import subprocess
import sys

from nbdsched_test.daemon import Daemon, one_ram_export
from nbdsched_test.process import wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks, skip

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def bounding_set(unit_file):
    """The unit's CapabilityBoundingSet= as setpriv's --bounding-set
    argument ("-all,+chown"); systemd merges the assignments and an empty
    one clears the set."""
    caps = set()
    with open(unit_file) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("CapabilityBoundingSet="):
                continue
            value = line.split("=", 1)[1].split()
            if not value:
                caps.clear()
            elif value[0].startswith("~"):
                skip(f"{unit_file}: an inverted CapabilityBoundingSet= is not handled here")
            caps.update(c.lower().removeprefix("cap_") for c in value)
    return ",".join(["-all"] + sorted("+" + c for c in caps)), caps


def main(unit_file, daemon):
    if os.geteuid() != 0:
        skip("needs root: the daemon gives the socket files to another user")
    for tool in ("setpriv", "nbdinfo"):
        if not shutil.which(tool):
            skip(f"{tool} is not installed")
    bset, caps = bounding_set(unit_file)
    print(f"{unit_file}: bounding set {sorted(caps) or 'empty'}")
    tmp = TempDir("sockowner")
    os.chmod(tmp.path, 0o755)   # nobody must reach the socket files
    group_sock, owner_sock = tmp.file("group.sock"), tmp.file("owner.sock")
    config = f"""listen:
  - {{unix: "{group_sock}", group: 65534, mode: "0660"}}
  - {{unix: "{owner_sock}", owner: 65534, group: 65534, mode: "0600"}}
""" + one_ram_export("8MiB")
    checks = Checks()
    d = None
    try:
        d = Daemon(config, "sockowner", workdir=tmp.path, binary=daemon,
                   wrapper=["setpriv", f"--bounding-set={bset}", "--inh-caps=-all"])
    except RuntimeError as e:
        checks.check("the daemon starts with the unit's capabilities", False, str(e).strip()[-400:])
    if d:
        checks.check("the daemon starts with the unit's capabilities", True)
        wait_for(lambda: os.path.exists(group_sock) and os.path.exists(owner_sock), 10)
        for path, uid, mode in ((group_sock, 0, 0o660), (owner_sock, 65534, 0o600)):
            st = os.stat(path)
            got = (st.st_uid, st.st_gid, oct(stat.S_IMODE(st.st_mode)))
            checks.check(f"{os.path.basename(path)}: owner {uid}, group 65534, mode {oct(mode)}",
                         got == (uid, 65534, oct(mode)), f"uid, gid, mode = {got}")
            r = subprocess.run(NOBODY + ["nbdinfo", "--size", f"nbd+unix:///default?socket={path}"],
                               capture_output=True, text=True, timeout=20)
            checks.check(f"nobody connects through {os.path.basename(path)}",
                         r.returncode == 0 and r.stdout.strip() == str(8 << 20),
                         (r.stdout + r.stderr).strip()[-300:])
        checks.clean_up(d, tmp)
    else:
        tmp.remove()
    checks.finish()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
