"""Experiment 11, what TLS costs: nbdsched (`none`, RAM) and `nbdkit
memory`, each plain and with TLS required (`tls: require` / `--tls=require`)
on the same pre-shared key (psktool), over a Unix socket and TCP loopback;
4k random reads at 64 in flight and 1 MiB sequential reads at 8 in flight,
one connection. fio's nbd engine cannot carry `tls-psk-file=` on Debian's
libnbd 1.14, so the loads come from libnbd clients that can: a small Python
libnbd loop (bench/lib/nbdload.py) for the 4k reads, `nbdcopy` into `null:`
for the 1 MiB reads. fio on plaintext nbdsched checks that neither client is
what limits the numbers.

Every server+transport is its own process, so its CPU time (/proc/PID/stat)
over a run is its own. Each repetition runs every client back to back in an
order rotated between repetitions: 3 interleaved repetitions, medians."""

import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import time

# bench/lib, the test library (tests/lib/python) and the TLS tests' key maker (tests/tls)
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p)
                for p in ("lib", "../tests/lib/python", "../tests/tls")]
import common  # noqa: E402
import exp11_report  # noqa: E402
import keys  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp11-tls"
IDENTITY = "alice"
SERVERS = ["nbdsched", "nbdsched-tls", "nbdkit", "nbdkit-tls"]
TRANSPORTS = ["unix", "tcp"]
WORKLOADS = [("randread", 4096, 64), ("read", 1 << 20, 8)]   # (pattern, request bytes, in flight)
NBDLOAD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "nbdload.py")
PY = "/usr/bin/python3"   # Debian's, with the nbd module


def start_all(srv, tmp, psk, size):
    """Fills srv: {(server, transport): Server}, each its own process."""
    dev = [common.ram_device("d", f"{size >> 20}MiB")]
    exp = [{"name": "x", "device": "d"}]
    for name in SERVERS:
        tls = (IDENTITY, psk) if name.endswith("-tls") else None
        for tr in TRANSPORTS:
            tag = f"{name}-{tr}"
            if name.startswith("nbdsched"):
                srv[(name, tr)] = servers.start_nbdsched(tmp, tag, dev, exp, tcp=tr == "tcp", tls_psk=tls)
            else:
                srv[(name, tr)] = servers.start_nbdkit_memory(tmp, tag, f"{size >> 20}M", tr, tls_psk=tls)


def tls_session(uri):
    """The cipher and key exchange libnbd reports for a TLS connection."""
    env = dict(os.environ, LIBNBD_DEBUG="1")
    r = subprocess.run(["nbdinfo", "--size", uri], capture_output=True, text=True, timeout=30, env=env)
    for line in r.stderr.splitlines():
        if "connection is using TLS:" in line:
            return line.split("connection is using TLS:", 1)[1].strip()
    return f"not reported (nbdinfo exit {r.returncode})"


def cipher_speeds():
    """{cipher: MiB/s} of the two ciphers the servers pick, on this machine
    (OpenSSL, one core, 16 KiB records: the largest TLS record)."""
    out = {}
    if not shutil.which("openssl"):
        return out
    for c in ("aes-128-gcm", "chacha20-poly1305"):
        r = subprocess.run(["openssl", "speed", "-mr", "-seconds", "1", "-bytes", "16384", "-evp", c],
                           capture_output=True, text=True, timeout=60)
        f = [line.split(":") for line in r.stdout.splitlines() if line.startswith("+F:")]
        out[c.upper()] = float(f[-1][-1]) / (1 << 20) if f else None
    return out


def client_argv(w, uri, runtime):
    """The load of workload w on one URI: nbdload (4k random) or nbdcopy
    (1 MiB, the whole export once, extents ignored so every byte is read)."""
    rw, bs, qd = w
    if rw == "randread":
        return [PY, NBDLOAD, uri, "--bs", str(bs), "--qd", str(qd), "--seconds", str(runtime)]
    return ["nbdcopy", "--no-extents", "--connections=1", f"--requests={qd}", f"--request-size={bs}", uri, "null:"]


def run_client(argv, size, bs, timeout):
    """(ios, bytes, seconds, client CPU seconds) of one client process. Its
    CPU time is what the children reaped meanwhile used: only it (the
    servers live on)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr.strip()[-300:]}")
    if argv[0] == PY:
        r = json.loads(p.stdout)
        if r["errors"]:
            raise RuntimeError(f"{r['errors']} reads failed")
        return r["ios"], r["bytes"], r["seconds"], cpu
    return size // bs, size, wall, cpu


def one_run(srv, k, w, runtime, size):
    """(throughput per s: IOPS or MiB/s, server CPU us per request, client CPU share, command)."""
    rw, bs, qd = w
    argv = client_argv(w, srv[k].uri("x", k[1]), runtime)
    cpu0 = srv[k].cpu()
    ios, nbytes, secs, ccpu = run_client(argv, size, bs, 60 + 10 * runtime)
    scpu = srv[k].cpu() - cpu0
    value = ios / secs if rw == "randread" else nbytes / secs / (1 << 20)
    return (value, scpu / ios * 1e6 if ios else None, ccpu / secs), argv


def fio_run(srv, w, runtime):
    """The same load through fio's nbd engine on plaintext nbdsched (Unix socket)."""
    rw, bs, qd = w
    s = srv[("nbdsched", "unix")]
    g = common.fio_base(runtime, 0)
    g.update({"rw": rw, "bs": bs, "iodepth": qd})
    r = fio.run(g, [("fio", {"uri": s.uri("x")})], [s], timeout=60 + 10 * runtime)
    sm = r.summary()
    j = r.jobs[0]
    value = sm["iops"] if rw == "randread" else sm["bw_mib"]
    return (value, r.server_cpu[0] / sm["ios"] * 1e6 if sm["ios"] else None,
            (j["usr_cpu"] + j["sys_cpu"]) / 100), r.argv


def main():
    a = common.args(__doc__)
    runtime, reps, size = (0.3, 1, 64 << 20) if a.quick else (3, 3, 2 << 30)
    facts = report.Facts()
    samples, commands, failures = {}, {}, []
    with TempDir("e11") as tmp, servers.Fleet() as srv:
        psk = keys.psk_dir(tmp, "psk", IDENTITY)
        start_all(srv, tmp, psk, size)
        sessions = {k: tls_session(s.uri("x", k[1])) for k, s in srv.items() if s.tls}
        keys_ = list(srv.keys()) + [("fio", "unix")]   # fio's check takes its turn in the rotation
        for rep in range(reps):
            for w in WORKLOADS:
                order = keys_[rep % len(keys_):] + keys_[:rep % len(keys_)]   # rotate per repetition
                for k in order:
                    try:
                        m, argv = fio_run(srv, w, runtime) if k[0] == "fio" else one_run(srv, k, w, runtime, size)
                    except (RuntimeError, ValueError, subprocess.TimeoutExpired, fio.FioError) as e:
                        failures.append(f"{k[0]} over {k[1]}, {exp11_report.wl_name(w)}, repetition {rep + 1}: "
                                        f"{str(e).splitlines()[0][:200]}")
                        continue
                    samples.setdefault((*k, w), {})[rep] = m
                    cmd = shlex.join(argv).replace(tmp, "$TMP").replace(NBDLOAD, "bench/lib/nbdload.py")
                    commands.setdefault((*k, w), cmd)
            print(f"exp11: repetition {rep + 1}/{reps} done", flush=True)
        configs = [f"# {k[0]} over {k[1]}: " + (json.dumps(s.config) if hasattr(s, "config") else " ".join(s.argv))
                   for k, s in srv.items()]
    speeds = {} if a.quick else cipher_speeds()
    med = common.medians({k: list(v.values()) for k, v in samples.items()})
    cmds = ["psktool -u alice -p $TMP/psk/keys.psk"] + [c.replace(tmp, "$TMP") for c in configs]
    cmds += [c for c in commands.values()]
    return exp11_report.write(NAME, a.quick, facts, med, reps, runtime, size, cmds, failures, sessions, speeds,
                              samples)


if __name__ == "__main__":
    main()
