"""The new process's side of a planned restart's hand-over protocol
(daemon/process/handover_wire.hpp), played by a test: a frame is [u32 text
length][u32 descriptor count] (host order), one byte per batch of up to 250
descriptors carrying that batch, then the text. A test asks with
"takeover" (or "takeover force"), reads "state ..." (or "refused ..."),
then answers "adopted" or "failed <why>" when it wants to."""
import array
import os
import socket
import struct
import subprocess

from nbdsched_test.daemon import nbdsched_binary
from nbdsched_test.process import stop_all, wait_for
from nbdsched_test.raw_nbd import exactly
from nbdsched_test.tempdir import TempDir

OLD_DAEMON = "the old daemon (hand-over)"


def start_generation(tmp, tag, text, args, procs, env=None):
    """One daemon process of a planned-restart test: `text` written to
    <tag>.yaml, its output to <tag>.log, `args` after --config (e.g.
    --takeover PATH); appended to `procs` (stop_all stops them)."""
    with open(tmp.file(f"{tag}.yaml"), "w") as f:
        f.write(text)
    with open(tmp.file(f"{tag}.log"), "w") as log:
        p = subprocess.Popen([nbdsched_binary(), "--config", tmp.file(f"{tag}.yaml"), *args], stdout=log,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    procs.append(p)
    return p


def ctl_at(control_socket, *args):
    """`nbdsched ctl --socket control_socket ARGS`: its stdout; an
    AssertionError on a non-zero exit. For a test whose daemons come and go
    on one control socket."""
    r = subprocess.run([nbdsched_binary(), "ctl", "--socket", control_socket, *args], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"ctl {' '.join(args)}: exit {r.returncode}: {r.stdout}{r.stderr}")
    return r.stdout


def log_of(tmp, tag):
    """What the process started as `tag` has logged so far."""
    with open(tmp.file(f"{tag}.log"), errors="replace") as f:
        return f.read()


class Generations:
    """`with Generations(name) as g:` the daemon processes of one
    planned-restart test in a directory of their own (g.tmp): g.start(tag,
    text, args) starts one, g.log(tag) reads its log. At the end every one
    still running is stopped and the directory removed."""

    def __init__(self, name):
        self.tmp = TempDir(name)
        self.procs = []

    def start(self, tag, text, args=()):
        return start_generation(self.tmp, tag, text, list(args), self.procs)

    def log(self, tag):
        return log_of(self.tmp, tag)

    def print_logs_if_failed(self, checks, *tags):
        """The end of each log named, when a check failed."""
        if checks.failed:
            for tag in tags:
                print(f"--- {tag} log ---\n" + self.log(tag)[-2500:])

    def take_over(self, checks, tag, text, handover, previous, which):
        """Starts `tag` with --takeover `handover`, then checks (a
        verdict.Checks) that `previous` exits 0 and `tag` gets ready; `which`
        names the new one in the checks ("second"). Its process."""
        p = self.start(tag, text, ["--takeover", handover])
        checks.check(f"the daemon before the {which} exits 0 after the hand-over", previous.wait(20) == 0)
        checks.check(f"{which} daemon ready", wait_for(lambda: "nbdsched: ready" in self.log(tag), 10))
        return p

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop_all(self.procs)
        self.tmp.remove()


def connect_handover(path, timeout=30):
    """A connection to the old daemon's hand-over socket; every later call
    on it gives up after `timeout` seconds (socket.timeout)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(path)
    return sock


def handover_message(sock, text):
    """One hand-over frame without descriptors."""
    sock.sendall(struct.pack("=II", len(text.encode()), 0) + text.encode())


def handover_reply(sock):
    """The text of one frame; the descriptors that come with it are closed
    (the old daemon keeps its own)."""
    length, count = struct.unpack("=II", exactly(sock, 8, OLD_DAEMON))
    for _ in range((count + 249) // 250):
        _, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(250 * 4))
        for _, _, data in ancillary:
            for fd in array.array("i", data[:len(data) - len(data) % 4]):
                os.close(fd)
    return exactly(sock, length, OLD_DAEMON).decode()
