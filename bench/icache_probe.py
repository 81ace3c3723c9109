"""What one request costs the daemon in instructions and cache misses, under
callgrind's cache simulation (valgrind models this machine's caches; the
kernel's side is not counted). It starts the daemon on a RAM device with the
given scheduler, fills it, zeroes the counters, runs nbdsched-load over TCP,
dumps the counters and divides by the requests served:

    /usr/bin/python3 bench/icache_probe.py --nbdsched build-rel/daemon/nbdsched \\
        --load build-rel/tools/load/nbdsched-load --scheduler bfq --rw randwrite

Besides the totals (instructions, L1 instruction and data misses a request) it
gives the code a request runs: the 64-byte lines whose busiest instruction ran
at least once every other request, by part of the daemon, and the functions
that miss the instruction cache most. A request's code does not fit the
32 KiB, 8-way L1 instruction cache of these machines once it spreads over too
many lines of the same sets: every line of an overfull set then misses on every
request (bfq: 36 misses a request before the request path was marked
[[gnu::hot]], 3 after; see docs/data-path.md). Needs valgrind (Debian's
package)."""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

PARTS = [("sched::bfq", "bfq"), ("sched::cfq", "cfq"), ("NoneScheduler", "none"), ("sched::qos", "qos"),
         ("nbdsched::daemon", "daemon"), ("nbdsched::backend", "backend"), ("nbdsched::nbd", "nbd"),
         ("asio", "asio")]


def part_of(function):
    return next((name for key, name in PARTS if key in function), "libc/std/other")


def parse(path):
    """Each instruction's execution count and function, from a callgrind profile
    written with --dump-instr=yes (positions: instr line); the totals line."""
    names, fn, addr, skip = {}, "?", 0, False
    count, owner, totals, events = collections.defaultdict(int), {}, None, []

    def name(kind, rest):
        m = re.match(r"\((\d+)\)(?: (.*))?", rest)
        if not m:
            return rest
        if m.group(2):
            names[(kind, m.group(1))] = m.group(2)
        return names.get((kind, m.group(1)), "?")

    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("events:"):
            events = line.split()[1:]
        elif line.startswith("totals:") or line.startswith("summary:"):
            totals = [int(x) for x in line.split()[1:]]
        elif line.startswith("fn="):
            fn = name("fn", line[3:])
        elif line.startswith("cfn="):
            name("fn", line[4:])
        elif line.startswith("calls="):
            skip = True   # the next cost line is the call's inclusive cost
        elif line and line[0] in "0123456789+-*":
            f = line.split()
            if f[0].startswith("0x"):
                addr = int(f[0], 16)
            elif f[0][0] in "+-":
                addr += int(f[0])
            if skip:
                skip = False
                continue
            count[addr] += int(f[2]) if len(f) > 2 else 0
            owner[addr] = fn
    return dict(zip(events, totals)), count, owner


def hot_lines(count, owner, requests):
    busiest, line_owner = collections.defaultdict(int), {}
    for a, n in count.items():
        if n > busiest[a // 64]:
            busiest[a // 64], line_owner[a // 64] = n, owner[a]
    return [line_owner[l] for l, n in busiest.items() if 2 * n >= requests]


def misses_by_function(path, requests, top):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--sort=I1mr", "--show=I1mr", path],
                         capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) (?:\([^)]*\))?\s*\S*?:(.*)", line)
        if m and "PROGRAM TOTALS" not in line:
            rows.append((int(m.group(1).replace(",", "")) / requests, m.group(2).split("(")[0].strip()))
    return rows[:top]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nbdsched", required=True)
    p.add_argument("--load", required=True, help="the nbdsched-load binary")
    p.add_argument("--scheduler", default="none")
    p.add_argument("--rw", default="randwrite")
    p.add_argument("--bs", default="4k")
    p.add_argument("--qd", type=int, default=64)
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--top", type=int, default=12)
    a = p.parse_args()

    d = tempfile.mkdtemp(prefix="nbdsched-icache.")
    port = 20000 + os.getpid() % 20000
    with open(f"{d}/c.yaml", "w") as f:
        f.write(f"devices:\n  - {{name: d, size: 256MiB, backend: ram, scheduler: {a.scheduler}}}\n"
                "exports:\n  - {name: x, device: d}\n")
    out = f"{d}/callgrind.out"
    daemon = subprocess.Popen(["valgrind", "--tool=callgrind", "--cache-sim=yes", "--dump-instr=yes",
                               "--instr-atstart=no", f"--callgrind-out-file={out}", a.nbdsched,
                               "-c", f"{d}/c.yaml", "--listen-tcp", f"127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=open(f"{d}/log", "w"))
    try:
        load = [a.load, "--tcp", f"127.0.0.1:{port}", "--export", "x"]
        for _ in range(100):   # valgrind takes seconds to start the daemon
            time.sleep(0.3)
            if subprocess.run(load + ["--rw", "write", "--bs", "1m", "--qd", "8", "--seconds", "0.1"],
                              capture_output=True).returncode == 0:
                break
        else:
            sys.exit(f"icache_probe: the daemon did not answer; see {d}/log")
        subprocess.run(load + ["--rw", "write", "--bs", "1m", "--qd", "8", "--seconds", "3"],
                       check=True, capture_output=True)   # fill: reads then find pages
        subprocess.run(["callgrind_control", "-i", "on", str(daemon.pid)], check=True, capture_output=True)
        run = json.loads(subprocess.run(load + ["--rw", a.rw, "--bs", a.bs, "--qd", str(a.qd), "--seconds",
                                                str(a.seconds), "--seed", "1"],
                                        check=True, capture_output=True, text=True).stdout)
        subprocess.run(["callgrind_control", "-i", "off", str(daemon.pid)], check=True, capture_output=True)
    finally:
        daemon.send_signal(2)
        daemon.wait(timeout=60)
    n = run["requests"]
    totals, count, owner = parse(out)
    print(f"{a.scheduler} {a.rw} {a.bs} qd{a.qd} over TCP: {n} requests under callgrind")
    print("a request: " + ", ".join(f"{e} {totals[e] / n:.1f}" for e in ("Ir", "I1mr", "D1mr", "D1mw")))
    lines = hot_lines(count, owner, n)
    parts = collections.Counter(part_of(f) for f in lines)
    print(f"code run every other request or more: {len(lines)} lines, {len(lines) * 64} bytes "
          f"({', '.join(f'{k} {v}' for k, v in parts.most_common())})")
    print("L1 instruction misses a request, by function:")
    for misses, function in misses_by_function(out, n, a.top):
        print(f"  {misses:5.2f}  {function}")
    print(f"profile: {out}")


if __name__ == "__main__":
    main()
