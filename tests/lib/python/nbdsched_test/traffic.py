"""A client that writes and reads back on one export until told to stop."""
import random

import nbd


def write_read_back(uri, seed, stop, result, base=0, slot=16 << 10, flush_and_trim=False):
    """Batches of 4 writes in flight at once, each read back; `result` gets
    ops and bad (reads that did not match). Writes in flight together may land
    in any order (NBD orders nothing; a file device's I/O threads run them at
    once), so a batch never overlaps itself: one write of 4 KiB up to `slot`
    per slot of 1000 from `base`. flush_and_trim: the batch's first write is
    FUA, then a FLUSH, and one slot's first 4 KiB trimmed and read as zeros."""
    rng = random.Random(seed)
    h = nbd.NBD()
    h.connect_uri(uri)
    ops = bad = 0
    while not stop.is_set():
        offsets = [base + n * slot for n in rng.sample(range(1000), 4)]
        datas = [bytes([rng.randrange(1, 256)]) * (4096 * rng.randrange(1, slot // 4096 + 1)) for _ in offsets]
        for i, (off, data) in enumerate(zip(offsets, datas)):
            fua = flush_and_trim and i == 0
            h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data)), off, flags=nbd.CMD_FLAG_FUA if fua else 0)
        while h.aio_in_flight() > 0:
            h.poll(-1)
        for off, data in zip(offsets, datas):
            bad += h.pread(len(data), off) != data
        ops += 2 * len(offsets)
        if flush_and_trim:
            h.flush()
            h.trim(4096, offsets[1])
            bad += h.pread(4096, offsets[1]) != bytes(4096)
            ops += 3
    h.shutdown()
    result.update(ops=ops, bad=bad)
