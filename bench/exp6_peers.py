"""Experiment 6, protocol overhead against the peers (no emulation, RAM):
nbdsched (`none`, `cfq`, `bfq`) vs `nbdkit memory` (its default 16 threads,
and `--threads 1`; the targets are judged against the faster of the two in
each repetition) vs `qemu-nbd` and `nbd-server` on a
/dev/shm file, over a Unix socket and TCP loopback; 4k randread and
randwrite at iodepth 1/16/64 with 1 and 2 jobs, 1 MiB sequential read and
write at iodepth 8; and fio directly on the /dev/shm file (libaio, no protocol) as
the limit.

Every server+transport is its own process (nbdkit, qemu-nbd and nbd-server
serve one address per process; nbdsched is started once per scheduler and
transport too), so the CPU time of each is its own (nbd-server's includes
the process it forks for each connection). One fio invocation per workload
and repetition runs all of them back to back (`stonewall`), in an order
rotated between repetitions: the servers are interleaved in time, 3 times.
Every export is written once first (1 MiB writes, one server after the
other): reads then copy data rather than holes, and no server pays for its
first touch of memory inside a measured job."""

import os
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import exp6_report  # noqa: E402
import peers_run  # noqa: E402
import report  # noqa: E402
from nbdsched_test import servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp6-peers"
WORKLOADS = ([(rw, "4k", qd, nj) for rw in ("randread", "randwrite") for qd in (1, 16, 64) for nj in (1, 2)]
             + [("read", "1m", 8, 1), ("write", "1m", 8, 1)])
QUICK_WORKLOADS = [("randread", "4k", 64, 1), ("read", "1m", 8, 1), ("write", "1m", 8, 1)]


def main():
    a = common.args(__doc__)
    runtime, reps = (0.5, 1) if a.quick else (1, 3)
    workloads = QUICK_WORKLOADS if a.quick else WORKLOADS
    facts = report.Facts()
    image = f"/dev/shm/nbdbench-{os.getpid()}.img"
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    try:
        with TempDir("e6") as tmp, servers.Fleet() as srv:
            peers_run.start(srv, tmp, image)
            peers_run.prefill(srv, list(srv.keys()), "16m" if a.quick else "1g")
            samples, commands, failures = peers_run.measure(srv, image, workloads, reps, runtime, tmp, "exp6")
    finally:
        os.unlink(image)
    med = common.medians({k: list(v.values()) for k, v in samples.items()})
    return exp6_report.write(NAME, a.quick, facts, med, workloads, reps, runtime, commands, peers_run.wl_name,
                             failures, samples)


if __name__ == "__main__":
    main()
