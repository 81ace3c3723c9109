"""Per-export access control (exports[].allow) with real clients against one
daemon: nbdinfo as root and as nobody over a unix socket whose mode lets
nobody connect, nbdinfo over TCP on 127.0.0.1, qemu-img for the refusal
message, libnbd in option mode for "refused, then another export on the same
connection". Also: --list shows only the exports a client may open, the
refusal is logged with the peer and counted in ctl stats and Prometheus, a
client already connected keeps working, and a SIGHUP that changes allow:
holds for the next connection.
"""
import json
import os
import shutil
import stat
import subprocess
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.metrics import sample, scrape
from nbdsched_test.process import free_port, run_bounded, wait_for
from nbdsched_test.verdict import check, skip

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

CONFIG = """
listen:
  - {unix: "{dir}/access.sock", mode: "0666"}
  - {tcp: "127.0.0.1:TCP_PORT"}
metrics: 127.0.0.1:METRICS_PORT
devices:
  - {name: d0, backend: ram, size: 40MiB}
exports:
  - {name: open, device: d0, size: 8MiB}
  - {name: private, device: d0, offset: 8MiB, size: 8MiB, allow: [{PRIVATE_RULE}]}
  - {name: nobodys, device: d0, offset: 16MiB, size: 8MiB, allow: [{user: nobody}, {group: nogroup}]}
  - {name: loopback, device: d0, offset: 24MiB, size: 8MiB, allow: [{address: 127.0.0.0/8}]}
  - {name: tenx, device: d0, offset: 32MiB, size: 8MiB, allow: [{address: "10.0.0.0/8"}]}
"""


def nbdinfo(uri, *args, user=None, debug=False):
    env = dict(os.environ, LIBNBD_DEBUG="1") if debug else None
    cmd = (NOBODY if user == "nobody" else []) + ["nbdinfo", *args, uri]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=env)
    return r.returncode, r.stdout + r.stderr


def listed(uri, user=None):
    rc, out = nbdinfo(uri, "--list", "--json", user=user)
    check(rc == 0, f"nbdinfo --list ({user or 'root'}, {uri}): {out[-300:]}")
    return sorted(e["export-name"] for e in json.loads(out[out.index("{"):])["exports"])


def refused(d, export):
    dev = d.device(d.stats(), "d0")
    return next((e["refused"] for e in dev["exports"] if e["name"] == export), 0)


def metric(port, name, export):
    return sample(scrape(port), name, f'device="d0",export="{export}"')


def main():
    if os.geteuid() != 0:
        return skip("needs root: clients run as root and as nobody (setpriv)")
    for tool in ("nbdinfo", "setpriv"):
        if not shutil.which(tool):
            return skip(f"{tool} not installed")
    tcp_port, metrics_port = free_port(), free_port()
    config = CONFIG.replace("TCP_PORT", str(tcp_port)).replace("METRICS_PORT", str(metrics_port))
    with Daemon(config.replace("PRIVATE_RULE", "uid: 0"), "access") as d:
        d.sock, d.tcp_port = os.path.join(d.dir, "access.sock"), tcp_port
        os.chmod(d.dir, 0o755)   # nobody must reach the socket file (not the control socket: 0600)
        # Ready means the control socket accepts; this listener may come a moment later.
        check(wait_for(lambda: os.path.exists(d.sock), 10), "the unix listener is there")
        st = os.stat(d.sock)
        check(stat.S_IMODE(st.st_mode) == 0o666, f"listen mode 0666 applied: {oct(st.st_mode)}")

        # A client already in transmission, to show refusals do not disturb it.
        keeper = nbd.NBD()
        keeper.connect_uri(d.uri("open"))
        keeper.pwrite(b"k" * 4096, 0)

        rc, out = nbdinfo(d.uri("private"))
        check(rc == 0 and "8388608" in out, f"root opens private (uid: 0): {out[-200:]}")
        rc, out = nbdinfo(d.uri("private"), user="nobody", debug=True)
        check(rc != 0, "nobody is refused private")
        check("denied by policy" in out, f"nbdinfo sees the server's policy message: {out[-300:]}")
        check(d.wait_log("export 'private' refused: unix pid") and "uid 65534" in d.log(),
              "the refusal is logged with the peer's pid and uid")
        rc, out = nbdinfo(d.uri("nobodys"), user="nobody")
        check(rc == 0, f"nobody opens nobodys (user: nobody): {out[-200:]}")
        rc, out = nbdinfo(d.uri("nobodys"))
        check(rc != 0, "root is refused nobodys")

        check(listed(d.uri()) == ["open", "private"], "root over unix lists open and private only")
        check(listed(d.uri(), user="nobody") == ["nobodys", "open"], "nobody lists open and nobodys only")
        check(listed(d.uri(transport="tcp")) == ["loopback", "open"], "TCP lists open and loopback only")

        rc, out = nbdinfo(d.uri("loopback", "tcp"))
        check(rc == 0, f"127.0.0.1 opens loopback (127.0.0.0/8): {out[-200:]}")
        rc, out = nbdinfo(d.uri("tenx", "tcp"))
        check(rc != 0, "127.0.0.1 is refused tenx (10.0.0.0/8)")
        rc, out = nbdinfo(d.uri("loopback"))
        check(rc != 0, "a unix client never matches an address rule")
        if shutil.which("qemu-img"):
            rc, out = run_bounded(["qemu-img", "info", d.uri("tenx", "tcp")])
            check(rc != 0 and "Denied by server" in out and "denied by policy" in out,
                  f"qemu-img says why: {out[-300:]}")

        # The same connection, refused, asks for another export and gets it.
        h = nbd.NBD()
        h.set_opt_mode(True)
        h.connect_uri(d.uri("", "tcp"))
        h.set_export_name("tenx")
        try:
            h.opt_go()
            check(False, "opt_go on tenx must fail")
        except nbd.Error as e:
            print(f"note: libnbd reports the refusal as: {e}")
        h.set_export_name("loopback")
        h.opt_go()
        h.pwrite(b"x" * 512, 0)
        check(h.pread(512, 0) == b"x" * 512, "after a refusal the same connection opens loopback and does I/O")
        h.shutdown()

        check(keeper.pread(4096, 0) == b"k" * 4096, "the client connected before the refusals still works")

        expect = {"private": 1, "nobodys": 1, "tenx": 2 + bool(shutil.which("qemu-img")), "loopback": 1}
        got = {name: refused(d, name) for name in expect}
        check(got == expect, f"refusals per export in ctl stats (one per connection): {got} vs {expect}")
        check("refused" in d.ctl("stats"), "ctl stats' table has the refused column")
        # The endpoint renders its text at most once a second.
        check(wait_for(lambda: metric(metrics_port, "nbdsched_export_refused_connections_total", "tenx") ==
                       expect["tenx"], 5), f"Prometheus: nbdsched_export_refused_connections_total tenx {expect['tenx']}")

        # SIGHUP: private now admits nobody instead of root, for new connections.
        d.write_config(config.replace("PRIVATE_RULE", "uid: 65534"))
        d.hup()
        check(d.wait_log("reload: done"), "reload with a new allow: applied")
        check("export private: allow: 1 rule(s) (new connections)" in d.log(), "the reload says what changed")
        rc, out = nbdinfo(d.uri("private"), user="nobody")
        check(rc == 0, f"after reload nobody opens private: {out[-200:]}")
        rc, out = nbdinfo(d.uri("private"))
        check(rc != 0, "after reload root is refused private")
        check(keeper.pread(4096, 0) == b"k" * 4096, "the early client survives the reload")
        keeper.shutdown()
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
