"""Planned restart by hand-over: one libnbd connection over the unix socket
keeps writing and reading back (8 requests in flight) while the daemon is
replaced by `nbdsched --takeover` several times. Checked: every request
succeeds and reads back what was written, the connection is the same one
throughout (libnbd never reconnects; each new daemon logs it as handed over),
each old daemon exits 0; a TLS connection and one in the handshake are
closed at the first hand-over, not passed. Also: a new process that fails after it received
everything leaves the old one serving; a RAM device refuses without --force;
a new configuration without the connection's export closes it with an error.
A device whose flush does not answer (a 60 s flush delay switched on with
`ctl faults`) fails the hand-over after the drain timeout: the new process
exits 1 naming the device, the old one serves on (ctl, both devices) while
that flush still hangs, refuses a second hand-over until it ends, and exits 1
when stopped with it still running.
Then the systemd way, with the test playing systemd's part: SIGTERM with
--fdstore-handover pushes everything into the fd store (FDSTORE=1 on
$NOTIFY_SOCKET), the next process gets it as LISTEN_FDS with names, goes
on with the same connection and removes its entries (FDSTOREREMOVE=1).
HANDOVER_ROUNDS (default 4) sets the number of restarts.
"""
import array
import fcntl
import shutil
import socket
import os
import random
import signal
import subprocess
import threading
import time

import nbd

from nbdsched_test.daemon import DRAIN_LIMITS, DRAIN_TIMEOUT_S, Daemon, nbdsched_binary, one_ram_export
from nbdsched_test.handover import log_of, start_generation
from nbdsched_test.process import wait_for
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check, skip

SIZE = 16 << 20
BLOCK = 4096
DEPTH = 8

# At most 3 requests of a connection in flight: the other 5 of a batch wait
# read but unparsed, so hand-overs also pass unread bytes.
CONFIG = """
limits: {{max_inflight_per_connection: 3}}
listen: [{{unix: {dir}/nbd.sock, tls: on}}]
tls: {{psk_file: {dir}/keys.psk}}
control: {dir}/ctl.sock
devices:
  - {{name: d0, backend: file, path: {dir}/disk.img, size: 16MiB}}
exports:
  - {{name: {export}, device: d0}}
"""


class Client(threading.Thread):
    """Batches of DEPTH writes of distinct blocks, then DEPTH reads of them,
    verified; remembers every block's content; records the slowest batch."""

    def __init__(self, uri):
        super().__init__(daemon=True)
        self.h = nbd.NBD()
        self.h.connect_uri(uri)
        self.stop = threading.Event()
        self.blocks = {}
        self.batches = 0
        self.max_ms = 0.0
        self.error = None
        self.seq = 0

    def batch(self):
        # Not the last block: the TLS connection writes that one in round 1.
        offsets = random.sample(range(SIZE // BLOCK - 1), DEPTH)
        data = {}
        for o in offsets:
            self.seq += 1
            data[o] = (self.seq.to_bytes(8, "little") + o.to_bytes(8, "little")) * (BLOCK // 16)
        start = time.monotonic()
        cookies = [self.h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data[o])), o * BLOCK) for o in offsets]
        self.wait(cookies)
        bufs = {o: nbd.Buffer(BLOCK) for o in offsets}
        cookies = [self.h.aio_pread(bufs[o], o * BLOCK) for o in offsets]
        self.wait(cookies)
        self.max_ms = max(self.max_ms, (time.monotonic() - start) * 1000)
        for o in offsets:
            if bufs[o].to_bytearray() != data[o]:
                raise AssertionError(f"block {o} read back wrong")
            self.blocks[o] = data[o]
        self.batches += 1

    def wait(self, cookies):
        while self.h.aio_in_flight() > 0:
            self.h.poll(-1)
        for c in cookies:
            self.h.aio_command_completed(c)   # raises on an error reply

    def run(self):
        try:
            while not self.stop.is_set():
                self.batch()
        except Exception as e:   # reported by the main thread
            self.error = e

    def finish(self):
        self.stop.set()
        self.join(20)
        return self.error


class FdStore:
    """systemd's side: a NOTIFY_SOCKET that keeps FDSTORE=1 descriptors by
    FDNAME and drops them on FDSTOREREMOVE=1."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.setblocking(False)
        self.fds = {}
        self.removed = []

    def drain(self):
        while True:
            try:
                msg, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
            except BlockingIOError:
                return
            fds = array.array("i")
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % 4])
            fields = dict(line.split("=", 1) for line in msg.decode().split("\n") if "=" in line)
            if fields.get("FDSTORE") == "1":
                for fd in fds:
                    self.fds[fields["FDNAME"]] = fd
            elif fields.get("FDSTOREREMOVE") == "1" and fields["FDNAME"] in self.fds:
                os.close(self.fds.pop(fields["FDNAME"]))
                self.removed.append(fields["FDNAME"])
            else:
                for fd in fds:
                    os.close(fd)

    def start(self, argv, log):
        """Starts argv as systemd starts a service with a filled store."""
        names = sorted(self.fds)
        fds = [self.fds[n] for n in names]

        def place_fds():   # in the child: the stored descriptors at 3, 4, ...
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in fds]
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)
                os.close(fd)

        env = dict(os.environ, NOTIFY_SOCKET=self.path, LISTEN_FDS=str(len(fds)), LISTEN_FDNAMES=":".join(names))
        return subprocess.Popen(["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"', *argv], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, close_fds=False,
                                preexec_fn=place_fds)


STARTED = []   # every daemon of the test: none may outlive it, whatever failed


def start(tmp, tag, export="default", args=(), env=None):
    return start_generation(tmp, tag, CONFIG.format(dir=tmp.path, export=export), args, STARTED, env)


def takeover(tmp, old, tag, export="default", env=None):
    new = start(tmp, tag, export, ["--takeover", tmp.file("handover.sock"), "--fdstore-handover"], env)
    try:
        status = old.wait(15)
    except subprocess.TimeoutExpired:
        status = "still running"
    return new, status


def main():
    rounds = int(os.environ.get("HANDOVER_ROUNDS", "4"))
    if not shutil.which("psktool"):
        skip("psktool (gnutls-bin) is not installed: no key for the TLS connection")
    tmp = TempDir("handover")
    subprocess.run(["psktool", "-u", "alice", "-p", tmp.file("keys.psk")], check=True, capture_output=True)
    with open(tmp.file("disk.img"), "wb") as f:
        f.truncate(SIZE)
    handover = tmp.file("handover.sock")
    store = FdStore(tmp.file("notify"))
    env = dict(os.environ, NOTIFY_SOCKET=store.path)
    old = start(tmp, "gen0", args=["--handover-socket", handover], env=env)
    check(wait_for(lambda: os.path.exists(handover) and os.path.exists(tmp.file("nbd.sock")), 10),
          "first daemon listens, serves hand-overs")
    client = Client(f"nbd+unix:///default?socket={tmp.file('nbd.sock')}")
    client.start()
    try:
        check(wait_for(lambda: client.batches >= 5 or client.error, 10), "client running")

        # Round 1 also has a TLS connection (its session cannot move: closed
        # after its replies) and one still in the handshake (closed).
        tls = nbd.NBD()
        tls.set_uri_allow_local_file(True)
        tls.connect_uri(f"nbds+unix://alice@/default?socket={tmp.file('nbd.sock')}&tls-psk-file={tmp.file('keys.psk')}")
        tls.pwrite(b"t" * BLOCK, SIZE - BLOCK)
        raw = socket.socket(socket.AF_UNIX)
        raw.connect(tmp.file("nbd.sock"))
        raw.settimeout(10)
        check(raw.recv(18)[:8] == b"NBDMAGIC", "a client in the handshake got the greeting")
        for i in range(1, rounds + 1):
            before = client.batches
            old, status = takeover(tmp, old, f"gen{i}", env=env)
            check(status == 0, f"restart {i}: the old daemon exited 0 after the hand-over ({status})")
            check(wait_for(lambda: client.batches >= before + 5 or client.error, 10) and not client.error,
                  f"restart {i}: the client goes on ({client.batches - before} batches, error {client.error})")
            log = log_of(tmp, f"gen{i}")
            check("adopted 1 listener(s) and 1 connection(s)" in log and "conn 1 (" in log and "handed over" in log,
                  f"restart {i}: the new daemon adopted connection 1")
            if i == 1:
                try:
                    tls.pread(BLOCK, SIZE - BLOCK)
                    check(False, "the TLS connection was closed at the hand-over")
                except nbd.Error:
                    check(True, "the TLS connection was closed at the hand-over")
                check(raw.recv(1) == b"", "the connection in the handshake was closed at the hand-over")
                raw.close()

        # A new process that fails after receiving everything (its control
        # socket cannot be made: its directory would be a regular file): the
        # old one serves on, same connection.
        with open(tmp.file("bad.yaml"), "w") as f:
            f.write(CONFIG.format(dir=tmp.path, export="default").replace(
                f"control: {tmp.path}/ctl.sock", f"control: {tmp.path}/disk.img/ctl.sock"))
        r = subprocess.run([nbdsched_binary(), "--config", tmp.file("bad.yaml"), "--takeover", handover],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 1 and "ctl.sock" in r.stderr, f"failing new process exits 1: {r.stderr.strip()[-200:]}")
        check(wait_for(lambda: "hand-over failed" in log_of(tmp, f"gen{rounds}"), 5) and old.poll() is None,
              "the old daemon logged the failed hand-over and serves on")
        # After that line the old daemon binds its control socket again and
        # takes its devices' locks back on a thread (a file device's too);
        # the connection stays parked, and a SIGTERM is an ordinary stop (not
        # one through the fd store), until the take-back has ended.
        check(wait_for(lambda: "hand-over: the locks are taken back" in log_of(tmp, f"gen{rounds}"), 10),
              "the old daemon takes its locks back after the failed hand-over")
        before = client.batches
        check(wait_for(lambda: client.batches >= before + 5 or client.error, 10) and not client.error,
              "the client goes on after the failed hand-over")
        check(wait_for(lambda: os.path.exists(tmp.file("ctl.sock")), 5), "control socket back")

        # Through the fd store: SIGTERM, then the next start gets it all.
        before = client.batches
        store.drain()
        old.send_signal(signal.SIGTERM)
        status = old.wait(15)
        store.drain()
        check(status == 0 and "nbdsched-state" in store.fds and len(store.fds) == 3,
              f"SIGTERM: state, listener and connection in the fd store, exit {status} ({sorted(store.fds)})")
        log = open(tmp.file("fdstore.log"), "w")
        old = store.start([nbdsched_binary(), "--config", tmp.file(f"gen{rounds}.yaml"), "--fdstore-handover",
                           "--handover-socket", handover], log)
        STARTED.append(old)
        check(wait_for(lambda: client.batches >= before + 5 or client.error, 10) and not client.error,
              f"the client goes on after the fd store hand-over (error {client.error})")
        check(wait_for(lambda: store.drain() or not store.fds, 5),
              f"the new process removed its entries from the store (left: {sorted(store.fds)})")
        check("handed over" in log_of(tmp, "fdstore"), "the new daemon adopted the connection")

        unread = [int(line.split("handed over, ")[1].split()[0])
                   for i in range(1, rounds + 1) for line in log_of(tmp, f"gen{i}").splitlines()
                   if "handed over, " in line]
        print(f"unread bytes passed with the connection: {unread}")
        error = client.finish()
        check(error is None, f"no error on the connection across {rounds + 1} hand-overs: {error}")
        print(f"hand-over: {rounds + 1} restarts, {client.batches} batches of {DEPTH} writes + {DEPTH} reads, "
              f"longest batch {client.max_ms:.0f} ms")
        for o, data in client.blocks.items():
            if client.h.pread(BLOCK, o * BLOCK) != data:
                raise AssertionError(f"block {o} lost")
        check(True, f"all {len(client.blocks)} written blocks read back")

        # A configuration without the export: the connection is closed, logged.
        old, status = takeover(tmp, old, "renamed", export="other")
        check(status == 0, "hand-over to a config without the export")
        check(wait_for(lambda: "which this configuration does not have" in log_of(tmp, "renamed"), 5),
              "the new daemon logs the connection whose export is gone")
        try:
            client.h.pread(BLOCK, 0)
            check(False, "the connection is closed")
        except nbd.Error:
            check(True, "the connection is closed")
        old.send_signal(signal.SIGTERM)
        check(old.wait(20) == 0, "last daemon stops cleanly")
    finally:
        client.stop.set()
        for proc in STARTED:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    # RAM devices refuse without --force.
    ram = Daemon(one_ram_export("8MiB"), "ram", args=["--handover-socket", tmp.file("ram-handover.sock")])
    r = subprocess.run([ram.binary, "--config", ram.config_path, "--takeover", tmp.file("ram-handover.sock")],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "RAM" in r.stderr and ram.alive(), "a RAM device refuses without --force")
    check(ram.stop() == 0, "and the RAM daemon serves on")
    stuck_flush(tmp)
    tmp.remove()
    return 0


STUCK_CONFIG = DRAIN_LIMITS + """
devices:
  - {name: slow, backend: file, path: {dir}/slow.img, size: 16MiB, faults: [{op: flush, delay: 60s}]}
  - {name: fast, backend: file, path: {dir}/fast.img, size: 16MiB}
exports:
  - {name: slow, device: slow}
  - {name: fast, device: fast}
"""


def error_lines(text):
    return " / ".join(line for line in text.splitlines() if "[error]" in line)[-300:]


def stuck_flush(tmp):
    """The hand-over's flush runs off the event loop, bounded by the drain
    timeout: a storage that does not answer fails the hand-over instead of
    freezing the old daemon."""
    sock = tmp.file("stuck-handover.sock")
    d = Daemon(STUCK_CONFIG, "stuck", workdir=tmp.path, args=["--handover-socket", sock])
    try:
        d.ctl("faults", "slow", "off")
        slow, fast = nbd.NBD(), nbd.NBD()
        slow.connect_uri(d.uri("slow"))
        fast.connect_uri(d.uri("fast"))
        slow.pwrite(b"s" * BLOCK, 0)
        d.ctl("faults", "slow", "on")   # from now on a flush of `slow` sleeps 60 s
        asked = time.monotonic()
        r = subprocess.run([d.binary, "--config", d.config_path, "--takeover", sock], capture_output=True, text=True,
                           timeout=DRAIN_TIMEOUT_S * 3 + 30)
        took = time.monotonic() - asked
        check(r.returncode == 1 and f"device slow: flush did not finish within {DRAIN_TIMEOUT_S * 1000} ms" in r.stderr,
              f"flush stuck: the new process exits 1 naming the device after {took:.1f} s: {error_lines(r.stderr)}")
        check(took < 60 - 5, f"... long before the stuck flush ends ({took:.1f} s of its 60 s)")
        check(d.alive() and d.wait_log("hand-over failed: device slow: flush did not finish", 5),
              "the old daemon logs the failed hand-over and serves on")
        # The flush still hangs (about 60 s from `asked`): the old daemon's loops are free.
        check(wait_for(lambda: os.path.exists(d.control), 5) and len(d.stats()["devices"]) == 2,
              "ctl answers while the flush still hangs")
        fast.pwrite(b"f" * BLOCK, 0)
        check(fast.pread(BLOCK, 0) == b"f" * BLOCK, "the other device serves its client meanwhile")
        check(slow.pread(BLOCK, 0) == b"s" * BLOCK, "the stuck device's client reads meanwhile")
        r = subprocess.run([d.binary, "--config", d.config_path, "--takeover", sock], capture_output=True, text=True,
                           timeout=DRAIN_TIMEOUT_S * 3 + 30)
        check(r.returncode == 1 and "device slow: the flush of an earlier hand-over has not finished" in r.stderr,
              f"a second hand-over is refused while that flush runs: {error_lines(r.stderr)}")
        check(time.monotonic() - asked < 60, "(the stuck flush was still running then)")
        d.ctl("faults", "slow", "off")   # the storage answers again, for new requests
        slow.pwrite(b"t" * BLOCK, BLOCK)
        slow.flush()
        check(slow.pread(BLOCK, BLOCK) == b"t" * BLOCK, "the stuck device's client writes and flushes again")
        for h in (slow, fast):
            h.shutdown()
        status = d.stop(timeout=DRAIN_TIMEOUT_S * 3 + 20)
        check(status == 1 and "device slow: the flush of a failed hand-over still waits for the storage" in d.log(),
              f"stopped while the abandoned flush still sleeps: exit 1 naming it ({status})")
    finally:
        if d.alive():
            d.proc.kill()
            d.proc.wait()


if __name__ == "__main__":
    raise SystemExit(main())
