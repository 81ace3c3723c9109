"""Crash consistency of backend: rbd: 20 rounds of writers doing plain
writes, FUA writes and FLUSHes through the daemon, the daemon SIGKILLed at
a random moment and restarted on the image with --break-lock (the killed
daemon still holds the lock: the fail-over path), and every block checked:
each holds what was last acknowledged as durable before the kill (a FUA
write, or a write acknowledged before a FLUSH that completed) or a later
write that was issued, never an older one and never a torn block.

Each writer thread owns its own blocks (block % WRITERS) and writes them
one request at a time, so a block's versions are ordered.

`--rbd-cache writearound|writeback` runs the same rounds with librbd's
cache on the device (rbd_cache:): a plain write is then answered from this
host's memory, and the same guarantee must hold through FLUSH and FUA.
"""
import argparse
import os
import random
import signal
import struct
import threading
import time

import nbd

from nbdsched_test.ceph import Cluster, rbd_config
from nbdsched_test.daemon import Daemon
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import Checks

BLOCK = 4096
BLOCKS = 1024   # 4 MiB
WRITERS = 4
ROUNDS = int(os.environ.get("CRASH_ROUNDS", "20"))


def content(block, version):
    head = struct.pack("<QQ", block, version)
    return head + bytes([(block + version) & 0xFF]) * (BLOCK - len(head))


def decode(data):
    block, version = struct.unpack_from("<QQ", data)
    return block, version, data == content(block, version) or (block, version) == (0, 0) and not any(data)


class State:
    """Per block: the version known durable and the newest issued."""

    def __init__(self):
        self.durable = [0] * BLOCKS
        self.issued = [0] * BLOCKS
        self.lock = threading.Lock()


def writer(uri, index, state, stop, rng):
    h = nbd.NBD()
    h.connect_uri(uri)
    acked = {}   # block -> version acknowledged since the last completed flush
    mine = range(index, BLOCKS, WRITERS)
    try:
        while not stop.is_set():
            roll = rng.random()
            if roll < 0.1:
                pending = dict(acked)
                h.flush()
                with state.lock:
                    for b, v in pending.items():
                        state.durable[b] = max(state.durable[b], v)
                acked.clear()
                continue
            b = rng.choice(mine)
            with state.lock:
                state.issued[b] += 1
                v = state.issued[b]
            fua = roll < 0.35
            h.pwrite(content(b, v), b * BLOCK, nbd.CMD_FLAG_FUA if fua else 0)
            if fua:
                with state.lock:
                    state.durable[b] = max(state.durable[b], v)
            else:
                acked[b] = v
    except nbd.Error:
        pass   # the daemon was killed


def verify(c, h, state, round_):
    data = h.pread(BLOCKS * BLOCK, 0)
    bad = []
    for b in range(BLOCKS):
        got_block, version, whole = decode(data[b * BLOCK:(b + 1) * BLOCK])
        ok = whole and (version == 0 or got_block == b) and state.durable[b] <= version <= state.issued[b]
        if not ok:
            bad.append(f"block {b}: read v{version} of block {got_block} (whole: {whole}), "
                       f"durable v{state.durable[b]}, issued v{state.issued[b]}")
    return c.check(f"round {round_}: every block holds a durable or later write", not bad, "; ".join(bad[:3]))


def config(conf, cache):
    keys = {"rbd_cache": cache} if cache else {}
    return (f"devices:\n  - {rbd_config('vol', 'img1', conf, scheduler='bfq', rotational='false', **keys)}\n"
            "exports:\n  - {name: vol, device: vol}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rbd-cache", choices=["writearound", "writeback"],
                        help="the device's rbd_cache (default: none, the daemon's default)")
    cache = parser.parse_args().rbd_cache
    c = Checks()
    rng = random.Random(int(os.environ.get("CRASH_SEED", time.time_ns())))
    tmp = TempDir("rbd-crash" + (f"-{cache}" if cache else ""))
    state = State()
    durable_total = 0
    try:
        with Cluster(tmp.path, ["img1:16M"]) as cluster:
            for round_ in range(ROUNDS + 1):
                d = Daemon(config(cluster.conf, cache), f"r{round_}", workdir=tmp.path, args=["--break-lock"])
                try:
                    if round_ == 0 and cache:
                        c.check(f"the device runs librbd's cache {cache}", f"librbd cache {cache}," in d.log())
                    h = nbd.NBD()
                    h.connect_uri(d.uri("vol"))
                    if not verify(c, h, state, round_):
                        d.print_log_tail()
                        break
                    h.shutdown()
                    if round_ == ROUNDS:
                        break
                    stop = threading.Event()
                    threads = [threading.Thread(target=writer, args=(d.uri("vol"), i, state, stop,
                                                                       random.Random(rng.random())))
                               for i in range(WRITERS)]
                    for t in threads:
                        t.start()
                    time.sleep(rng.uniform(0.2, 0.5))
                    d.send(signal.SIGKILL)
                    stop.set()
                    for t in threads:
                        t.join(timeout=30)
                finally:
                    d.stop(timeout=10)
            durable_total = sum(state.durable)
            print(f"{ROUNDS} rounds: {sum(state.issued)} writes issued, durable versions summed {durable_total}")
            c.check("the rounds wrote durably at all", durable_total > 0)
    finally:
        tmp.remove()
    c.finish()


if __name__ == "__main__":
    main()
