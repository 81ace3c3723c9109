"""nbdsched-load against the real daemon: what it writes lands where it
says, what it reports adds up, and bad input is refused clearly.

One daemon with a 16 MiB RAM device, exported read-write (`rw`) and
read-only (`ro`), and two small ones with faults, over a Unix socket and
TCP:
- sequential 64 KiB writes at qd8 for 1 s wrap the device at least once
  (16 MiB/s is enough: a release build writes 4 GB/s here, so even a
  sanitizer build on a loaded machine has room); libnbd then reads the whole
  device and every 512-byte sector holds its own offset and the fill byte;
- random 4 KiB reads at qd64 over TCP: requests > 0, bytes = requests x
  4096, no errors, iops = requests / seconds;
- the daemon's own counters saw exactly the reads the tool reports (and
  the check's 16 of 1 MiB);
- reads that fail (a device whose reads all fail with EIO) are counted as
  errors, and the run exits 1 saying so;
- a server that stops answering (reads delayed 5 s) fails the run after
  --stall-timeout 0.5, well before the reply would come;
- refused: writes to the read-only export (exit 1, says read-only), a
  socket nobody listens on (exit 1, names it), --bs 1000 (exit 2), --bs
  2M over the daemon's max_request_bytes of 1 MiB (exit 1, names the
  limit), 64 writes of 32 MiB in flight (exit 2: over 1 GiB of buffers)."""
import json
import struct
import subprocess
import sys
import time

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

LOAD = sys.argv[1]
SIZE = 16 << 20
SECTOR = 512
FILL = 0x5A
CONFIG = """devices:
  - {name: d0, size: 16MiB}
  - name: slow
    size: 1MiB
    faults: [{op: read, delay: 5s}]
  - name: failing
    size: 1MiB
    faults: [{op: read, error: EIO}]
exports:
  - {name: rw, device: d0}
  - {name: ro, device: d0, readonly: true}
  - {name: slow, device: slow}
  - {name: failing, device: failing}
limits:
  max_request_bytes: 1MiB
"""


def load(*args):
    p = subprocess.run([LOAD, *args], capture_output=True, text=True, timeout=60)
    out = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, out, p.stderr.strip()


def sectors_wrong(data):
    """Sectors whose stamp is not their offset or whose rest is not the fill."""
    wrong = []
    rest = bytes([FILL]) * (SECTOR - 8)
    for at in range(0, len(data), SECTOR):
        stamp = struct.unpack_from("<Q", data, at)[0]
        if stamp != at or data[at + 8:at + SECTOR] != rest:
            wrong.append(at)
    return wrong


def main():
    checks = Checks()
    with Daemon(CONFIG, "load-client", tcp=True) as d:
        rc, out, err = load("--unix", d.sock, "--export", "rw", "--rw", "write", "--bs", "64k", "--qd", "8",
                            "--seconds", "1")
        checks.check("sequential writes run", rc == 0 and out is not None, f"rc {rc}, {err}")
        if out:
            checks.check("they wrapped the device at least once", out["bytes"] >= SIZE, f"{out['bytes']} bytes")
            checks.check("bytes = requests x 64 KiB", out["bytes"] == out["requests"] * 65536)
        h = nbd.NBD()
        h.set_export_name("rw")
        h.connect_unix(d.sock)
        data = b"".join(h.pread(1 << 20, off) for off in range(0, SIZE, 1 << 20))
        h.shutdown()
        wrong = sectors_wrong(data)
        checks.check("every sector holds its offset and the fill byte", not wrong,
                     f"{len(wrong)} wrong, first at {wrong[:3]}")

        rc, out, err = load("--tcp", f"127.0.0.1:{d.tcp_port}", "--export", "rw", "--rw", "randread",
                            "--qd", "64", "--seconds", "0.3")
        checks.check("random reads over TCP run", rc == 0 and out is not None, f"rc {rc}, {err}")
        if out:
            checks.check("requests > 0, none failed", out["requests"] > 0 and out["errors"] == 0, str(out))
            checks.check("bytes = requests x 4096", out["bytes"] == out["requests"] * 4096)
            checks.check("iops = requests / seconds",
                         abs(out["iops"] - out["requests"] / out["seconds"]) <= 0.01 * out["iops"] + 1)
            checks.check("the client's CPU was measured", 0 < out["cpu_s"] < 10 * out["seconds"], str(out))
            served = Daemon.device(d.stats(), "d0")["counters"]["reads"]
            checks.check("the daemon answered those reads and the check's 16", served == out["requests"] + 16,
                         f"{served} vs {out['requests']} + 16")

        rc, out, err = load("--unix", d.sock, "--export", "failing", "--rw", "randread", "--qd", "4",
                            "--seconds", "0.1")
        checks.check("failed reads are counted and fail the run",
                     rc == 1 and out is not None and out["requests"] > 0 and out["errors"] == out["requests"]
                     and out["bytes"] == 0 and "answered with an error" in err, f"rc {rc}, {out}, {err}")
        t0 = time.monotonic()
        rc, out, err = load("--unix", d.sock, "--export", "slow", "--rw", "randread", "--qd", "1",
                            "--seconds", "0.1", "--stall-timeout", "0.5")
        took = time.monotonic() - t0
        checks.check("a server that stops answering fails the run after the stall timeout",
                     rc == 1 and "no reply for 0.5 s" in err and took < 4, f"rc {rc}, {took:.1f} s, {err}")

        rc, out, err = load("--unix", d.sock, "--export", "ro", "--rw", "randwrite", "--seconds", "0.1")
        checks.check("writes to a read-only export are refused", rc == 1 and "read-only" in err, f"rc {rc}, {err}")
        rc, out, err = load("--unix", d.sock + ".nobody", "--rw", "read", "--seconds", "0.1")
        checks.check("a socket nobody listens on is named", rc == 1 and ".nobody" in err, f"rc {rc}, {err}")
        rc, out, err = load("--unix", d.sock, "--export", "rw", "--rw", "read", "--bs", "1000")
        checks.check("a request size that is not whole sectors is a usage error", rc == 2 and "512" in err,
                     f"rc {rc}, {err}")
        rc, out, err = load("--unix", d.sock, "--export", "rw", "--rw", "read", "--bs", "2M")
        checks.check("a request over the export's largest is refused before any is sent",
                     rc == 1 and out is None and "1048576" in err, f"rc {rc}, {err}")
        rc, out, err = load("--unix", d.sock, "--export", "rw", "--rw", "write", "--bs", "32M", "--qd", "64")
        checks.check("write buffers over 1 GiB are a usage error, not a failed allocation",
                     rc == 2 and "1 GiB" in err, f"rc {rc}, {err}")
    checks.finish()


if __name__ == "__main__":
    main()
