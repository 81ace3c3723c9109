"""A client that queues reads on a slow device and closes its socket has no
one to answer: its reads that the scheduler has not dispatched yet are
dropped (answered at dispatch without being read, with no device time in the
timing model), so they do not take the device from live clients. Before,
all of them were read for nobody, and the next client waited behind them.

Four clients each queue 256 random 4 KiB READs on an hdd-profile file device
(cfq) and close. Counts, not speed: once the device has nothing in flight,
its stats count all 1024 reads answered, at most half of them read (a
client is seen gone when its first reply cannot be written, so the reads
dispatched before that still run) and the others as `cancelled`, not as
reads; before, all 4 MiB were read, and then the dropped ones were counted
as reads of 0 bytes. Then a new client's READ and WRITE are answered and
its data reads back."""
import random
import struct
import sys
import time

from nbdsched_test.daemon import Daemon
from nbdsched_test.raw_nbd import CMD_READ, CMD_WRITE, REQUEST_MAGIC, connect_export, read_reply, send_request
from nbdsched_test.verdict import check

CLIENTS, READS, BLOCK = 4, 256, 4096
SIZE = 64 << 20


def main():
    config = f"""devices:
  - name: f0
    backend: file
    path: {{dir}}/disk.img
    size: {SIZE}
    scheduler: cfq
    profile: hdd
exports:
  - name: default
    device: f0
"""
    with Daemon(config, "dead_client_reads") as d:
        rng = random.Random(3)
        for _ in range(CLIENTS):
            s = connect_export(d.sock)
            s.sendall(b"".join(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, i,
                                           rng.randrange(SIZE // BLOCK) * BLOCK, BLOCK) for i in range(READS)))
            s.close()
        deadline = time.monotonic() + 60
        while True:
            dev = Daemon.device(d.stats(), "f0")["counters"]
            if dev["in_flight"] == 0 and dev["reads"] + dev.get("cancelled", 0) >= CLIENTS * READS:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the dead clients' reads are still in flight after 60 s: {dev}")
            time.sleep(0.1)
        total = CLIENTS * READS * BLOCK
        check(dev["read_bytes"] <= total // 2,
              f"of {CLIENTS} closed clients' {CLIENTS * READS} reads ({total >> 10} KiB), "
              f"{dev['read_bytes'] >> 10} KiB were read (at most half; before, all)")
        check(dev["errors"] == 0, f"dropped reads are not counted as errors ({dev['errors']})")
        cancelled = dev.get("cancelled", 0)
        check(cancelled >= CLIENTS * READS // 2 and dev["reads"] + cancelled == CLIENTS * READS,
              f"the dropped reads count as cancelled ({cancelled}), not as reads ({dev['reads']})")
        group = Daemon.group(Daemon.device(d.stats(), "f0"), "default")["counters"]
        check(group.get("cancelled") == cancelled, f"and so in their group ({group.get('cancelled')})")

        s = connect_export(d.sock)
        data = bytes(rng.randrange(256) for _ in range(BLOCK))
        send_request(s, CMD_WRITE, 1, 8 * BLOCK, BLOCK, data)
        check(read_reply(s, 1) == (0, b""), "a new client's WRITE is answered")
        send_request(s, CMD_READ, 2, 8 * BLOCK, BLOCK)
        check(read_reply(s, 2, BLOCK) == (0, data), "and its READ reads it back")
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
