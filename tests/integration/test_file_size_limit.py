"""The daemon under a file size limit (RLIMIT_FSIZE: ulimit -f, systemd
LimitFSIZE=, some container runtimes), here 8 MiB with `prlimit`.

  - two pre-sized 16 MiB files, one on the I/O threads and one on io_uring:
    a write past 8 MiB gets NBD_ENOSPC on both (EFBIG is ENOSPC in
    nbd/transmission.cpp), and a write below the limit still works after
    it: the daemon lives on (before: SIGXFSZ ended the daemon on the threads);
  - a start that must create a 16 MiB file exits 1 naming the file and the
    limit, and leaves no file behind (before: killed by SIGXFSZ, status
    153, nothing logged, a 0-byte file left).
"""
import errno
import os
import shutil
import subprocess
import sys

import nbd

from nbdsched_test.daemon import Daemon, nbdsched_binary
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks, skip

MiB = 1 << 20
LIMIT = ["prlimit", f"--fsize={8 * MiB}"]
CONFIG = """
devices:
  - {name: ft, backend: file, path: "{dir}/ft.img", size: 16MiB, io_engine: threads}
  - {name: fa, backend: file, path: "{dir}/fa.img", size: 16MiB, io_engine: auto}
exports:
  - {name: ft, device: ft}
  - {name: fa, device: fa}
"""


def write_error(sock, export, offset):
    h = nbd.NBD()
    h.set_export_name(export)
    try:
        h.connect_unix(sock)
        h.pwrite(b"x" * 4096, offset)
        return 0
    except nbd.Error as e:
        return e.errnum
    finally:
        try:
            h.shutdown()
        except nbd.Error:
            pass


def serving(c):
    with TempDir("fsize") as tmp:
        for name in ("ft.img", "fa.img"):
            with open(os.path.join(tmp, name), "wb") as f:
                f.truncate(16 * MiB)
        d = Daemon(CONFIG, "fsize", workdir=tmp, control=False, wrapper=LIMIT)
        try:
            for export in ("ft", "fa"):
                err = write_error(d.sock, export, 12 * MiB)
                c.check(f"{export}: a write past the limit gets ENOSPC", err == errno.ENOSPC,
                        f"errno {err} ({errno.errorcode.get(err, '?')})")
                err = write_error(d.sock, export, 1 * MiB)
                c.check(f"{export}: a write below the limit works after it", err == 0, f"errno {err}")
        finally:
            if c.failed:
                d.print_log_tail()
            d.stop()


def start_up(c):
    binary = nbdsched_binary()
    with TempDir("fsize-start") as tmp:
        config = os.path.join(tmp, "start.yaml")
        with open(config, "w") as f:
            f.write(f"listen: [{{unix: {tmp}/s.sock}}]\n" + CONFIG.replace("{dir}", tmp))
        r = subprocess.run([*LIMIT, binary, "--config", config], capture_output=True, text=True, timeout=30)
        out = r.stdout + r.stderr
        c.check("a start over the limit exits 1", r.returncode == 1, f"status {r.returncode}")
        c.check("it says why", "File too large" in out and "ft.img" in out and "file size limit" in out,
                out.strip().splitlines()[-1] if out.strip() else "no output")
        c.check("no file is left behind", not os.path.exists(os.path.join(tmp, "ft.img")))


def main():
    if not shutil.which("prlimit"):
        skip("no prlimit here (util-linux)")
    c = Checks()
    serving(c)
    start_up(c)
    c.finish()


if __name__ == "__main__":
    sys.exit(main())
