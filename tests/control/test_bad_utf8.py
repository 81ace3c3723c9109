"""Bytes that are not UTF-8 never end the daemon or spoil what it writes.

A control request line with such a byte (JSON that nlohmann refuses, whose
error text quotes the byte) gets an {"ok":false} reply and the daemon serves
on; so does `nbdsched ctl` given such a byte as a device name. A configuration
whose export name or description is not UTF-8 is refused with its
file:line:col by --check-config and at start.
"""
import json
import socket
import subprocess
import sys

from nbdsched_test.daemon import Daemon, nbdsched_binary, one_ram_export
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check


def request(path, line):
    """One raw line on the control socket; the reply line, parsed."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(line)
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            reply += chunk
    check(reply.endswith(b"\n"), f"a whole reply line to {line!r}: {reply!r}")
    return json.loads(reply.decode("utf-8"))   # strict: the reply is UTF-8


def main():
    binary = nbdsched_binary()
    tmp = TempDir("bad-utf8")
    try:
        bad = tmp.file("bad.yaml")
        with open(bad, "wb") as f:
            f.write(b"devices: [{name: d0, size: 16MiB}]\n"
                    b"exports:\n"
                    b"  - {name: ok, device: d0, description: \"caf\xc3\xa9\"}\n"
                    b"  - {name: \"e\xfex\", device: d0}\n")
        for args in (["--check-config", bad], ["--config", bad]):
            r = subprocess.run([binary, *args], capture_output=True, timeout=30)
            err = r.stderr.decode("utf-8", "replace")
            check(r.returncode == 1 and f"{bad}:4:12: exports[1].name: not valid UTF-8" in err,
                  f"{args[0]}: a non-UTF-8 export name is refused at its line and column "
                  f"(exit {r.returncode}): {err.strip()}")
    finally:
        tmp.remove()

    with Daemon(one_ram_export("16MiB"), "bad-utf8") as d:
        for line in (b'{"cmd":"\xff"}\n', b'{"cmd":"get","device":"d\xfe0","tunable":"x"}\n', b'\xc3\n'):
            reply = request(d.control, line)
            check(reply["ok"] is False and "bad request" in reply["error"],
                  f"error reply to {line!r}: {reply}")
            check(d.alive(), "the daemon serves on")
        r = subprocess.run([binary, "ctl", "--socket", d.control, "get", b"d\xff", "slice_idle"],
                           capture_output=True, timeout=30)
        err = r.stderr.decode("utf-8", "replace")
        check(r.returncode == 1 and "no device" in err, f"ctl with a non-UTF-8 device name: exit {r.returncode}: {err}")
        check(d.alive(), "the daemon serves on")
        check(d.listing()["devices"][0]["name"] == "d0", "ctl list still answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
