"""A start that fails leaves the devices' files as they were. A file device
whose `size:` is larger than its file grows the file at start, and a
missing one is created; when the start then fails (a later device cannot
be opened, a listener cannot be bound, a --takeover finds no daemon to
take over from), the grown file is shrunk back to its size (its data kept)
and the created one removed. Before, both stayed: the next start with the
size corrected was refused ("file is 16MiB, larger than the configured
size"), and a file nobody asked for was left behind.

Each failing start: `grown.img` (1 MiB of a pattern) is configured at
16 MiB and `created.img` does not exist (8 MiB configured); the daemon
exits 1 naming the cause. After it `grown.img` is 1 MiB with the same
bytes, `created.img` is gone, and the log says what was restored. A start
that succeeds keeps both at their new sizes after its stop."""
import os
import subprocess
import sys

from nbdsched_test.daemon import Daemon, nbdsched_binary
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

MIB = 1 << 20
DEVICES = """devices:
  - {{name: grown, backend: file, path: "{dir}/grown.img", size: 16MiB}}
  - {{name: created, backend: file, path: "{dir}/created.img", size: 8MiB}}
"""
EXPORTS = """exports:
  - {name: grown, device: grown}
  - {name: created, device: created}
"""
PATTERN = bytes(i % 251 for i in range(MIB))


def failing_start(checks, tmp, name, config, args, cause):
    with open(os.path.join(tmp, "grown.img"), "wb") as f:
        f.write(PATTERN)
    path = os.path.join(tmp, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(config)
    r = subprocess.run([nbdsched_binary(), "--config", path, *args], capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    checks.check(f"{name}: the start fails with exit 1, saying why", r.returncode == 1 and cause in out,
                 f"status {r.returncode}: {out[-800:]}")
    size = os.path.getsize(os.path.join(tmp, "grown.img"))
    with open(os.path.join(tmp, "grown.img"), "rb") as f:
        same = f.read(MIB) == PATTERN
    checks.check(f"{name}: the file grown for it is back to 1 MiB, its data kept", size == MIB and same,
                 f"{size} bytes, data {'kept' if same else 'changed'}")
    checks.check(f"{name}: the file created for it is removed", not os.path.exists(os.path.join(tmp, "created.img")))
    checks.check(f"{name}: the log says so", "grown.img: shrunk back to 1MiB" in out and
                 "created.img: removed" in out, out[-800:])


def main():
    checks = Checks()
    with TempDir("failed-start") as tmp:
        devices = DEVICES.format(dir=tmp)
        listen = f"listen: [{{unix: {tmp}/nbd.sock}}]\n"
        # A later device cannot be opened: its file is missing and no size says to create it.
        failing_start(checks, tmp, "later-device",
                      listen + devices + f'  - {{name: bad, backend: file, path: "{tmp}/missing.img"}}\n' + EXPORTS,
                      [], "missing.img: does not exist and no size is configured")
        # A listener cannot be bound: its directory is a regular file.
        failing_start(checks, tmp, "listener", f"listen: [{{unix: {tmp}/grown.img/nbd.sock}}]\n" + devices + EXPORTS,
                      [], "nbd.sock")
        # --takeover finds no daemon to take over from.
        failing_start(checks, tmp, "takeover", listen + devices + EXPORTS,
                      ["--takeover", os.path.join(tmp, "nobody.sock")], "nobody.sock")

        # A start that succeeds keeps what it grew and created.
        with open(os.path.join(tmp, "grown.img"), "wb") as f:
            f.write(PATTERN)
        d = Daemon(devices + EXPORTS, "ok", workdir=tmp, control=False)
        status = d.stop()
        checks.check("a start that succeeds keeps the grown file grown and the created one after its stop",
                     status == 0 and os.path.getsize(os.path.join(tmp, "grown.img")) == 16 * MIB and
                     os.path.getsize(os.path.join(tmp, "created.img")) == 8 * MIB, f"stop status {status}")
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
