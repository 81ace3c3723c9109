#!/usr/bin/env python3
"""Writes the hand-made seed inputs of tests/fuzz/corpus/<target>/seed-*.

Run from anywhere; idempotent. Inputs found by fuzzing (crashes fixed,
coverage worth keeping) are added next to these under other names."""
import os
import random
import struct

here = os.path.dirname(os.path.abspath(__file__))
IHAVEOPT = 0x49484156454F5054


def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def opt(option, data=b""):
    return struct.pack(">QII", IHAVEOPT, option, len(data)) + data


def info(name, infos=()):
    n = name.encode()
    return struct.pack(">I", len(n)) + n + struct.pack(">H", len(infos)) + b"".join(
        struct.pack(">H", i) for i in infos)


# --- handshake: client flags, then options
FLAGS = struct.pack(">I", 3)
put("handshake", "go-default", FLAGS + opt(7, info("", (0, 1, 2, 3))))
put("handshake", "list-info-go", FLAGS + opt(8) + opt(3) + opt(6, info("ro", (1, 2))) + opt(7, info("default")))
put("handshake", "export-name", FLAGS + opt(1, b"default"))
put("handshake", "export-name-zeroes", struct.pack(">I", 1) + opt(1, b"ro"))
put("handshake", "oldstyle-export-name", struct.pack(">I", 0) + opt(1, b""))
put("handshake", "oldstyle-go", struct.pack(">I", 0) + opt(7, info("default")))
put("handshake", "abort", FLAGS + opt(2))
put("handshake", "refused", FLAGS + opt(5) + opt(9) + opt(10) + opt(11) + opt(99, b"xyz") + opt(7, info("nope")))
# STARTTLS (each input runs against tls off, on and require): refused
# options first, then STARTTLS and the same options "over TLS"; a second
# STARTTLS; STARTTLS with data; EXPORT_NAME before TLS.
put("handshake", "starttls-go", FLAGS + opt(8) + opt(3) + opt(5) + opt(8) + opt(3) + opt(7, info("default", (0, 1))))
put("handshake", "starttls-twice", FLAGS + opt(5) + opt(5) + opt(5, b"x") + opt(1, b"default"))
put("handshake", "starttls-data", FLAGS + opt(5, b"junk") + opt(6, info("ro")) + opt(2))
put("handshake", "export-name-before-tls", FLAGS + opt(1, b"default"))
put("handshake", "malformed", FLAGS + opt(6, b"\x00\x00\x10\x00ab") + opt(3, b"x") + opt(8, b"y") + opt(7, info("n" * 4096)))


def meta(name, queries):
    n = name.encode()
    out = struct.pack(">I", len(n)) + n + struct.pack(">I", len(queries))
    for q in queries:
        out += struct.pack(">I", len(q)) + q.encode()
    return out


put("handshake", "meta-context", FLAGS + opt(9, meta("", ["base:allocation"])) + opt(8) +
    opt(9, meta("default", [])) + opt(9, meta("ro", ["base:", "qemu:dirty-bitmap:x"])) +
    opt(10, meta("default", ["base:allocation", "base:allocation"])) + opt(10, meta("nope", ["base:allocation"])) +
    opt(7, info("default")))
put("handshake", "meta-context-set-then-other-export", FLAGS + opt(8) + opt(10, meta("ro", ["base:allocation"])) +
    opt(10, meta("default", ["x:y"])) + opt(10, meta("ro", ["base:allocation"])) + opt(7, info("default")))
put("handshake", "meta-context-malformed", FLAGS + opt(8) + opt(10, b"\x00\x00\x00\x00\xff\xff\xff\xff") +
    opt(9, meta("default", ["base:allocation"])[:-3]) + opt(10, meta("default", ["b" * 4097])) +
    opt(1, b"default"))
put("handshake", "bad-magic", FLAGS + b"IHAVEOPX" + struct.pack(">II", 7, 0))
put("handshake", "loop", FLAGS + opt(3) * 40)
put("handshake", "unknown-flags", struct.pack(">I", 0xFFFF))

# --- transmission: shape byte, size, [max payload], errno draw, headers
MAGIC = 0x25609513


def req(typ, off, length, flags=0, cookie=1, magic=MAGIC):
    return struct.pack(">IHHQQI", magic, flags, typ, cookie, off, length)


ordinary = bytes([2]) + struct.pack("<I", 1 << 26) + struct.pack("<H", 5)
reqs = [req(0, 0, 4096), req(1, 4096, 65536, 1, 2), req(3, 0, 0, 0, 3), req(4, 1 << 20, 1 << 20, 0, 4),
        req(6, 0, 8192, 2, 5), req(2, 0, 0, 0, 6), req(0, 0, 0, 4, 7), req(0, (1 << 26) - 512, 1024, 0, 8),
        req(1, 0, 33 << 20, 0, 9), req(7, 0, 4096, 0, 10), req(5, 0, 4096, 0, 11), req(0, 0, 4096, 0x20, 12)]
put("transmission", "ordinary", ordinary + b"".join(reqs))
put("transmission", "simple-ro", bytes([1]) + struct.pack("<I", 1 << 20) + struct.pack("<H", 28) + b"".join(reqs))
put("transmission", "huge", bytes([4 | 8 | 2]) + struct.pack("<Q", 0) + struct.pack("<I", 512) + struct.pack("<H", 12)
    + req(0, (1 << 64) - 4096, 8192) + req(1, (1 << 64) - 1, 1) + req(6, 0, 0xFFFFFFFF, 2))
# Block status negotiated (shape 16), structured: REQ_ONE, past the end,
# length 0, FAST_ZERO on zeroes and on a write, CACHE; then extents drawn.
extents = bytes([5]) + b"".join(bytes([1]) + struct.pack("<Q", 1 << 33) + bytes([3]) for _ in range(5)) + bytes([4])
put("transmission", "block-status", bytes([16 | 2]) + struct.pack("<I", 1 << 26) + struct.pack("<H", 5) +
    req(7, 0, 1 << 20, 8, 1) + extents + req(7, 0, 1 << 20, 0, 2) + extents + req(7, (1 << 26) - 4096, 8192, 0, 3) +
    req(7, 0, 0, 0, 4) + req(6, 0, 4096, 16 | 2, 5) + req(1, 0, 4096, 16, 6) + req(5, 0, 1 << 26, 0, 7))
put("transmission", "bad-magic", ordinary + req(0, 0, 512, magic=0x25609514) + req(0, 0, 512))

# --- config
with open(os.path.join(here, "..", "..", "config", "nbdsched.example.yaml"), "rb") as f:
    put("config", "example", f.read())
put("config", "minimal", b"devices:\n  - {name: d0, size: 64MiB}\nexports:\n  - {name: default, device: d0}\n")
put("config", "cfq-bfq", b"""listen:
  - unix: /tmp/x.sock
  - tcp: "[::1]:10809"
devices:
  - name: a
    backend: file
    path: /tmp/a.img
    scheduler: cfq
    tunables: {slice_idle: 8ms, quantum: 4, low_latency: 1}
    profile: hdd
    hdd: {rpm: 5400, avg_seek: 9ms}
  - name: b
    size: 1GiB
    scheduler: bfq
    tunables: {strict_guarantees: 1, max_budget: auto}
    profile: ssd
    ssd: {channels: 4}
exports:
  - {name: x, device: a, offset: 0, size: 1GiB, group: g1}
  - {name: y, device: b, readonly: true}
groups:
  - {name: g1, weight: 500}
  - {name: g2, weight: from-cgroup}
rules:
  - match: {uid: 1000, address: 10.0.0.0/8}
    group: g1
  - match: {}
    group: g2
limits: {max_connections: 10, max_request_bytes: 1MiB, max_inflight_bytes_per_connection: 2MiB}
""")
put("config", "errors", b"""devices:
  - name: d0
    size: abc
    scheduler: xyz
    tunables: {nope: 1}
  - name: d0
exports:
  - {name: e, device: missing, offset: 100GiB}
groups: [{name: g, weight: 0}]
bogus: 1
""")
put("config", "syntax", b"devices: [ {name: d0, size: 1GiB\nexports: &a *a\n---\nx: 1\n")
put("config", "anchors", b"devices:\n  - &d {name: d0, size: 1GiB}\nexports:\n  - {name: e, device: d0}\n  - <<: *d\n")

# --- scheduler: policy, rotational, depth, tunable, then events
rng = random.Random(8)
for policy in range(3):
    for rot in range(2):
        head = struct.pack("<I", policy) + bytes([rot]) + struct.pack("<I", 31 + 17 * policy) + bytes([1]) + \
            struct.pack("<I", rng.randrange(1 << 20)) + struct.pack("<I", rng.randrange(12))
        opens = b"".join(struct.pack("<III", 0, q, q % 3) for q in range(4))
        body = bytes(rng.randrange(256) for _ in range(3000))
        put("scheduler", f"p{policy}-r{rot}", head + opens + body)

# --- control: request lines against d0 (cfq), d1 (bfq, QoS), d2 (none, faults)
# and the groups default, g1 and cg (weight: from-cgroup)
put("control", "commands", b"\n".join([
    b'{"cmd":"list"}', b'{"cmd":"stats"}',
    b'{"cmd":"get","device":"d0","tunable":"slice_idle"}',
    b'{"cmd":"set","device":"d0","tunable":"slice_idle","value":"4ms"}',
    b'{"cmd":"set","device":"d1","tunable":"max_budget","value":0}',
    b'{"cmd":"set","device":"d2","tunable":"x","value":"1"}',
    b'{"cmd":"weight","group":"g1","weight":7}', b'{"cmd":"weight","group":"cg","weight":7}',
    b'{"cmd":"faults","device":"d2","enabled":true}', b'{"cmd":"faults","device":"d0"}',
    b'{"cmd":"reload"}']))
put("control", "qos", b"\n".join([
    b'{"cmd":"reserve","group":"g1","iops":100,"bps":"20MiB"}',
    b'{"cmd":"limit","group":"g1","iops":50,"burst":"10ms"}',
    b'{"cmd":"limit","group":"default","bps":"1MiB"}',
    b'{"cmd":"limit","group":"g1","burst":"1s"}',
    b'{"cmd":"latency-target","group":"g1","target":"5ms"}',
    b'{"cmd":"latency-target","group":"g1","target":"off"}',
    b'{"cmd":"reserve","group":"cg","iops":-1}', b'{"cmd":"limit","group":"g1","bps":"1KiB"}',
    b'{"cmd":"list"}']))
put("control", "malformed", b"\n".join([
    b'', b'{', b'[]', b'{"cmd":1}', b'{"cmd":"weight","group":"g1","weight":-5}',
    b'{"cmd":"weight","group":"g1","weight":1e3}', b'{"cmd":"weight","group":"g1","weight":18446744073709551617}',
    b'{"cmd":"weight","group":"g1","weight":0}', b'{"cmd":"weight","group":"g1","weight":1001}',
    b'{"cmd":"get","device":["d0"],"tunable":"x"}', b'{"cmd":"set","device":"d0","tunable":"slice_idle","value":1.5}',
    b'{"cmd":"faults","device":"d2","enabled":"yes"}', b'{"cmd":"nope"}', b'"\\ud800"', b'\xff\xfe']))

# --- handover: mode byte (0 raw socket bytes, 1 framed text, 2 fd count + JSON)
state = (b'{"version":1,"listeners":[{"fd":0,"tls":0},{"fd":1,"tls":2}],"connections":[{"id":7,'
         b'"peer":"unix pid 12 uid 0","identity":{"unix":true,"groups":[0,10],"cgroup":"/a","address":"",'
         b'"pid":12,"uid":0,"gid":0,"cgroup_hex":"2fff"},"export":"default","size":67108864,"flags":1,'
         b'"structured":true,"block_status":false,"group":"g1","unread":"2560951300","fd":2}],'
         b'"ctl_changes":{"weights":[{"group":"g1","weight":7,"file_weight":500}],"tunables":[{"device":"d0",'
         b'"policy":"cfq","name":"slice_idle","value":"4ms","file_value":"8ms"}],"faults":[{"device":"d2",'
         b'"enabled":true}]}}')
put("handover", "state", bytes([2, 3]) + state)
put("handover", "state-minimal", bytes([2, 0]) + b'{"version":1,"listeners":[],"connections":[]}')
put("handover", "state-bad", bytes([2, 2]) + state.replace(b'"fd":2', b'"fd":-1').replace(b'2fff', b'2ff'))
put("handover", "takeover-state", bytes([1]) + b"state " + state)
put("handover", "takeover-refused", bytes([1]) + b"refused another hand-over is running")
put("handover", "frame", bytes([0]) + struct.pack("<II", len(state) + 6, 0) + b"state " + state)
put("handover", "frame-truncated", bytes([0]) + struct.pack("<II", 100, 0) + b"state {")
put("handover", "frame-fds", bytes([0]) + struct.pack("<II", 6, 3) + b"Fstate ")
put("handover", "frame-huge", bytes([0]) + struct.pack("<II", 0xFFFFFFFF, 0xFFFFFFFF))

# --- inflight-budget: pool, bytes, fair share, then events
for i, head in enumerate([bytes([3, 0, 0, 0, 0, 7, 0, 0, 0, 0]), bytes([0, 0, 0, 0, 1, 0, 0, 0, 0, 1]),
                          bytes([15, 0, 0, 0, 0, 63, 0, 0, 0, 0])]):
    put("inflight-budget", f"run{i}", head + bytes(rng.randrange(256) for _ in range(2000)))

# --- qos-bucket: rotational, depth, policy, the limit, then events
for policy in range(3):
    head = bytes([0]) + struct.pack("<I", 7) + struct.pack("<I", policy) + struct.pack("<I", 3) + \
        struct.pack("<I", 99) + struct.pack("<I", 1000) + struct.pack("<I", 99)
    put("qos-bucket", f"p{policy}", head + bytes(rng.randrange(256) for _ in range(3000)))
