"""A read load on one NBD connection through libnbd, for what fio's nbd
engine cannot reach: Debian's libnbd 1.14 refuses `tls-psk-file=` in the URIs
fio passes (local file access), so TLS with a pre-shared key needs a client
that allows it. Random (or sequential) reads of --bs bytes with --qd of them
in flight for --seconds; prints one JSON line: ios, bytes, seconds (first
request to last reply, connection setup excluded), errors.

    /usr/bin/python3 bench/lib/nbdload.py URI [--bs 4096] [--qd 64] [--seconds 3] [--seq]

One Python loop per connection: a completion callback counts the reply and
retires the command; after each poll the loop refills what completed.
bench/exp11_tls.py checks it against fio on a plaintext server."""

import argparse
import json
import random
import time

import nbd


def run(uri, bs, qd, seconds, seq):
    h = nbd.NBD()
    h.set_uri_allow_local_file(True)   # tls-psk-file= in the URI
    h.set_pread_initialize(False)      # fio's engine does not clear buffers either
    h.connect_uri(uri)
    blocks = h.get_size() // bs
    rnd = random.Random(11)
    offsets = [(i if seq else rnd.randrange(blocks)) % blocks * bs for i in range(1 << 16)]
    buf = nbd.Buffer(bs)   # replies land in one buffer: the data is not looked at
    done = [0, 0]          # replies, errors

    def completed(err):
        done[0] += 1
        if err.value:
            done[1] += 1
        return 1           # retire the command

    n = 0
    t0 = time.monotonic()
    end = t0 + seconds
    for n in range(qd):
        h.aio_pread(buf, offsets[n], completed)
    n += 1
    while True:
        h.poll(-1)
        if time.monotonic() >= end:
            break
        for _ in range(qd - h.aio_in_flight()):
            h.aio_pread(buf, offsets[n & 0xFFFF], completed)
            n += 1
    while h.aio_in_flight() > 0:
        h.poll(-1)
    elapsed = time.monotonic() - t0
    h.shutdown()
    return {"ios": done[0], "bytes": done[0] * bs, "seconds": elapsed, "errors": done[1]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("uri")
    p.add_argument("--bs", type=int, default=4096)
    p.add_argument("--qd", type=int, default=64)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--seq", action="store_true", help="sequential offsets (default: random)")
    a = p.parse_args()
    print(json.dumps(run(a.uri, a.bs, a.qd, a.seconds, a.seq)))


if __name__ == "__main__":
    main()
