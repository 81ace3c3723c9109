"""The test library itself, without a daemon: pattern() gives the C++
tests' bytes, TempDir cleans up, fio options become fio's argv, a Server
waits for its socket, reports its exit and shows its log, and Daemon
writes its listen and control addresses into a configuration."""
import json
import os
import signal
import stat
import sys

from nbdsched_test import fio
from nbdsched_test.daemon import Daemon
from nbdsched_test.patterns import pattern
from nbdsched_test.process import DaemonizedServer, Server, cpu_seconds, wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check

# tests/lib/cpp pattern(1048570, 16, 7) and pattern(0, 8), printed by the C++ code
CPP_PATTERN = [135, 182, 175, 2, 237, 69, 60, 117, 118, 1, 216, 247, 87, 118, 155, 170,
               233, 83, 124, 95, 127, 158, 163, 69]

LISTENER = """
import socket, sys, time
print("listening", flush=True)
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen()
time.sleep(60)
"""


def test_pattern():
    check(list(pattern(1048570, 16, 7) + pattern(0, 8)) == CPP_PATTERN, "pattern() = the C++ pattern()")
    check(pattern(4096, 512, 2)[100:200] == pattern(4196, 100, 2), "a sub-range checks on its own")


def test_tempdir():
    with TempDir("selftest") as path:
        check(os.path.isdir(path) and len(path) < 60, f"a short private directory: {path}")
    if not os.environ.get("NBDSCHED_KEEP_TMP"):
        check(not os.path.exists(path), "removed at the end")


def test_fio_command():
    argv = fio.fio_command({"thread": True, "runtime": 4, "rw": "write"},
                           [("a", {"uri": "nbd://x/a"}), ("b", {})])
    check(argv == ["fio", "--output-format=json", "--thread", "--runtime=4", "--rw=write",
                   "--name=a", "--uri=nbd://x/a", "--name=b"], f"fio argv: {argv}")


def test_fio_job_names():
    side = {"iops": 100.0, "bw": 400, "total_ios": 100, "lat_ns": {"mean": 1000, "stddev": 0}}
    none = {"iops": 0.0, "bw": 0, "total_ios": 0, "lat_ns": {"mean": 0, "stddev": 0}}
    jobs = [{"jobname": n, "read": side, "write": none} for n in ("a", "b", "b")]
    r = fio.Result(["fio"], {"jobs": jobs}, 1.0, [])
    check(len(r.job("b")) == 2 and r.summary(r.job("a"))["iops"] == 100, "job(name): every clone of a job")
    try:
        r.job("c")
        check(False, "job() of a name fio did not run raises (not an empty list that sums to 0 IOPS)")
    except KeyError as e:
        check("'c'" in str(e) and "a, b" in str(e), f"job() of a name fio did not run raises: {e}")


def test_fio_window_iops():
    # bench exp10's flooded run, as fio 3.33 reported it: the 8 flood clones
    # issued 75 requests each in the 12 s window and then waited 3.8 s for the
    # 64 each still had out (their completions are in io_bytes, not total_ios).
    def read(ios, runtime_ms, done):
        return {"iops": ios * 1000 / runtime_ms, "bw": 0, "total_ios": ios, "runtime": runtime_ms,
                "io_bytes": done * 4096, "lat_ns": {"mean": 1000, "stddev": 0}}
    idle = {"iops": 0.0, "bw": 0, "total_ios": 0, "runtime": 0, "lat_ns": {"mean": 0, "stddev": 0}}
    jobs = [{"jobname": "reader", "read": read(580, 12017, 580), "write": idle}]
    jobs += [{"jobname": "flood", "read": read(75, 15817, 138), "write": idle} for _ in range(8)]
    argv = fio.fio_command({"time_based": True, "runtime": "12000ms", "ramp_time": "3000ms"},
                           [("reader", {"iodepth": 1}), ("flood", {"iodepth": 64, "numjobs": 8})])
    r = fio.Result(argv, {"jobs": jobs}, 19.0, [])
    flood = r.window_iops(r.job("flood"), "read")
    check(abs(flood - 50.0) < 0.01 and r.summary(r.job("flood"))["iops"] < 38,
          f"window_iops: the requests of the 12 s window over 12 s (50.0), not over fio's 15.8 s runtime: {flood}")
    check(abs(r.window_iops(r.job("reader")) - 580 / 12) < 0.01, "a job that drains at once: the same window")
    untimed = fio.Result(fio.fio_command({"runtime": "12000ms"}, [("flood", {})]), {"jobs": jobs[1:]}, 19.0, [])
    check(abs(untimed.window_iops() - 8 * 75 / 15.817) < 0.01, "not time_based: fio's own iops (the run is the window)")
    own = fio.fio_command({"time_based": True}, [("reader", {"runtime": "13s"}), ("flood", {"runtime": "12"})])
    r = fio.Result(own, {"jobs": jobs}, 19.0, [])
    reader, flood = r.window_iops(r.job("reader")), r.window_iops(r.job("flood"))
    check(abs(reader - 580 / 12.017) < 0.01 and abs(flood - 50.0) < 0.01,
          "a job's own runtime option (a bare number is seconds); a window past fio's runtime leaves fio's iops")


def test_server():
    tmp = TempDir("selftest")
    sock = tmp.file("s.sock")
    s = Server("listener", [sys.executable, "-c", LISTENER, sock], tmp.path, tmp.file("l.log"), sock=sock)
    check(s.alive() and os.path.exists(sock), "returns once the socket accepts")
    check(s.uri("x") == f"nbd+unix:///x?socket={sock}", "unix URI")
    check(s.wait_log("listening"), "its output is in its log")
    check(s.stop() == -signal.SIGTERM, "stopped by SIGTERM")
    check(s.stop() == -signal.SIGTERM, "a second stop changes nothing")
    try:
        Server("fails", ["sh", "-c", "echo broken config; exit 3"], tmp.path, tmp.file("f.log"), sock=sock + "2")
        check(False, "a server that exits must raise")
    except RuntimeError as e:
        check("status 3" in str(e) and "broken config" in str(e), f"start-up failure with its log: {e}")
    tmp.remove()


# Forks into the background like nbd-server: the command exits 0, the daemon
# writes its pid, listens, and forks a child per "connection": one that burns
# 0.3 s of CPU and is reaped, one that burns 0.3 s and stays.
FORKING = """
import os, socket, sys, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
if os.fork():
    sys.exit(0)
os.setsid()
with open(sys.argv[2], "w") as f:
    f.write(f"{os.getpid()}\\n")
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen()
child = os.fork()
if child == 0:
    burn(0.3)
    os._exit(0)
os.waitpid(child, 0)
if os.fork() == 0:
    burn(0.3)
    time.sleep(60)
    os._exit(0)
print("forked", flush=True)
time.sleep(60)
"""


def test_daemonized_server():
    tmp = TempDir("selftest")
    sock, pid_file = tmp.file("d.sock"), tmp.file("d.pid")
    s = DaemonizedServer("forking", [sys.executable, "-c", FORKING, sock, pid_file], tmp.path, tmp.file("d.log"),
                         pid_file, sock=sock)
    with open(pid_file) as f:
        check(s.alive() and s.pid == int(f.read()) and os.path.exists(sock),
              f"follows the daemon (pid {s.pid}, from its pid file) once it listens")
    wait_for(lambda: s.cpu() - cpu_seconds(s.pid) >= 0.55, 30)   # both children burnt their 0.3 s
    own, tree = cpu_seconds(s.pid), s.cpu()
    check(tree - own >= 0.55, f"its CPU counts the reaped and the live child: {tree:.2f} s against its own {own:.2f} s")
    group = s.pid
    s.stop()
    check(not s.alive(), "stopped")
    os.killpg(group, signal.SIGKILL)   # the live child, which this stand-in does not stop
    try:
        DaemonizedServer("fails", ["sh", "-c", "echo no exports; exit 1"], tmp.path, tmp.file("f.log"),
                         tmp.file("f.pid"), sock=sock + "2")
        check(False, "a command that exits 1 must raise")
    except RuntimeError as e:
        check("status 1" in str(e) and "no exports" in str(e), f"start-up failure with its log: {e}")
    tmp.remove()


def test_daemon_config():
    tmp = TempDir("selftest")
    fake = tmp.file("fake-nbdsched")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\nexec sleep 60\n")
    os.chmod(fake, stat.S_IRWXU)
    d = Daemon("devices: []\nmetrics: {dir}/m\n", "t", workdir=tmp.path, binary=fake, wait=False)
    with open(d.config_path) as f:
        text = f.read()
    check(f"listen: [{{\"unix\": \"{d.sock}\"}}]" in text and f"control: {d.control}" in text,
          "YAML: listen and control added")
    check(f"metrics: {tmp.path}/m" in text, "{dir} is the daemon's directory")
    check(d.stop() == -signal.SIGTERM, "stopped")
    # a relative binary (meson passes executables so) runs although the daemon's cwd is its directory
    d = Daemon({"devices": [], "listen": [{"unix": "/x"}]}, "j", workdir=tmp.path, binary=os.path.relpath(fake),
               tcp=True, control=False, wait=False)
    with open(d.config_path) as f:
        cfg = json.load(f)
    check(cfg == {"devices": [], "listen": [{"unix": "/x"}]} and d.sock is None and d.tcp_port is None,
          "a dict with its own listen is written as it is")
    check(d.stop() == -signal.SIGTERM, "a relative binary started")
    tmp.remove()


if __name__ == "__main__":
    for t in (test_pattern, test_tempdir, test_fio_command, test_fio_job_names, test_fio_window_iops, test_server,
              test_daemonized_server, test_daemon_config):
        t()
