"""A weight, an iops count and --pid out of range are refused with one
wording, the configuration's ("out of range: 0 (allowed 1..1000)"), whether
the configuration file, the daemon (control protocol) or `nbdsched ctl`
itself finds it: exit 1 for a value out of range, 2 for one that is not a
number. Unsigned JSON numbers are read as unsigned (no "weight -1"), long
digit strings are out of range (not a "bad setting"), and a key given twice
is refused.
"""
import json
import socket
import subprocess
import sys

from nbdsched_test.daemon import Daemon, nbdsched_binary
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check

CONFIG = """
devices: [{{name: d0, backend: ram, size: 16MiB, scheduler: cfq}}]
exports: [{{name: e, device: d0}}]
groups: [{{name: ga, weight: {weight}}}]
"""

CASES = [
    (("weight", "ga", "0"), 1, '"weight": out of range: 0 (allowed 1..1000)'),
    (("weight", "ga", "1001"), 1, '"weight": out of range: 1001 (allowed 1..1000)'),
    (("weight", "ga", "99999999999999999999"), 1, '"weight": out of range: 99999999999999999999 (allowed 1..1000)'),
    (("weight", "ga", "abc"), 2, "expected a whole number 1..1000, got 'abc'"),
    (("limit", "ga", "iops=9999999999999999999"), 1, '"iops": out of range: 9999999999999999999 (allowed 1..100000000)'),
    (("limit", "ga", "iops=0"), 1, '"iops": out of range: 0 (allowed 1..100000000)'),
    (("reserve", "ga", "iops=1", "iops=2"), 2, "iops given twice"),
    (("reload", "--pid", "0"), 2, "not in range 1 to 2147483647"),
]


def ask(path, request):
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(json.dumps(request).encode() + b"\n")
        out = b""
        while not out.endswith(b"\n"):
            out += s.recv(65536)
    return json.loads(out)


def main():
    tmp = TempDir("ctl-ranges")
    try:
        path = tmp.file("bad.yaml")
        with open(path, "w") as f:
            f.write(CONFIG.format(weight=0))
        r = subprocess.run([nbdsched_binary(), "--check-config", path], capture_output=True, text=True, timeout=30)
        check(r.returncode != 0 and "weight: out of range: 0 (allowed 1..1000)" in r.stderr,
              f"the configuration's words: {r.stderr.strip()}")
    finally:
        tmp.remove()

    with Daemon(CONFIG.format(weight=100), "ctl-ranges") as d:
        for args, rc, words in CASES:
            r = subprocess.run([d.binary, "ctl", "--socket", d.control, *args], capture_output=True, text=True,
                               timeout=30)
            check(r.returncode == rc and words in r.stderr,
                  f"ctl {' '.join(args)}: exit {r.returncode} (want {rc}), {r.stderr.strip()!r} has {words!r}")
            check(len(r.stderr) < 300, f"... in a short message ({len(r.stderr)} bytes)")
        for value, shown in ((18446744073709551615, "18446744073709551615"), (9223372036854775808,
                                                                               "9223372036854775808"), (-3, "-3")):
            reply = ask(d.control, {"cmd": "weight", "group": "ga", "weight": value})
            check(not reply["ok"] and reply["error"] == f'"weight": out of range: {shown} (allowed 1..1000)',
                  f"protocol weight {value}: {reply}")
        check(next(g for g in d.listing()["groups"] if g["name"] == "ga")["weight"] == 100, "nothing applied")
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
