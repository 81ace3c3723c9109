"""limits.threads: a graceful stop (SIGTERM) while clients of the device on
event loop 1 have replies they have not read yet. The stop closes each
connection's sending half and lingers until its client has read what was
sent or hangs up; the clients here close at random moments during that.
The daemon must exit 0 and every client must have had its replies. In the
tsan suite the daemon is the ThreadSanitizer build, which fails its exit
status (66) on a data race: the linger's timer used to run on loop 0, which
accepted the socket, while the socket lived on loop 1.
"""
import random
import signal
import socket
import struct
import threading
import time

from nbdsched_test import raw_nbd
from nbdsched_test.daemon import Daemon
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check

CONFIG = """
devices:
  - {name: d0, backend: ram, size: 16MiB, scheduler: cfq}
  - {name: d1, backend: ram, size: 16MiB, scheduler: bfq}
exports:
  - {name: a, device: d0}
  - {name: b, device: d1}
limits: {threads: 2}
log_level: info
"""
CLIENTS = 16
READS = 8              # of 64 KiB each: more than the socket buffer holds
REPLY = 16 + 65536     # simple reply header + data


def open_export(path, name):
    """Fixed newstyle, NBD_OPT_EXPORT_NAME: transmission with simple replies."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    assert raw_nbd.exactly(s, raw_nbd.GREETING_BYTES)[:8] == raw_nbd.NBDMAGIC
    s.sendall(struct.pack(">I", raw_nbd.CLIENT_FLAGS))
    raw_nbd.send_option(s, raw_nbd.OPT_EXPORT_NAME, name)
    raw_nbd.exactly(s, 10)   # size and transmission flags (NO_ZEROES)
    return s


def client(path, rng, stop_sent, got, i):
    s = open_export(path, b"b")
    for k in range(READS):
        raw_nbd.send_request(s, raw_nbd.CMD_READ, k, k * 65536, 65536)
    stop_sent.wait()
    time.sleep(0.2)
    want = READS * REPLY - rng.randint(1, 60000)   # some left unread: the daemon lingers
    n = 0
    s.settimeout(10)
    try:
        while n < want:
            b = s.recv(min(65536, want - n))
            if not b:
                break
            n += len(b)
    except OSError:
        pass
    time.sleep(rng.uniform(0, 0.5))
    s.close()
    got[i] = n


def main():
    rng = random.Random(7)
    with TempDir("lingerstop") as tmp:
        d = Daemon(CONFIG, "lingerstop", workdir=tmp)
        try:
            check(d.wait_log("event loops: 2 (devices: d0 on 0, d1 on 1)"), "two loops, d1 on loop 1")
            stop_sent = threading.Event()
            got = {}
            threads = [threading.Thread(target=client, args=(d.sock, random.Random(rng.random()), stop_sent, got, i))
                       for i in range(CLIENTS)]
            for t in threads:
                t.start()
            time.sleep(1.0)   # every client's reads queued, replies waiting in its socket
            d.send(signal.SIGTERM)
            stop_sent.set()
            for t in threads:
                t.join()
            status = d.proc.wait(timeout=60)   # d.stop() would signal it again
            d.stop()
        except BaseException:
            print(d.log()[-4000:])
            raise
        check(status == 0, f"the daemon exits 0 after the graceful stop (status {status})")
        short = {i: n for i, n in got.items() if n < REPLY}
        check(len(got) == CLIENTS and not short,
              f"all {CLIENTS} clients received replies ({sorted(got.values())[:3]}... bytes; short: {short})")
    print("PASS")


if __name__ == "__main__":
    main()
