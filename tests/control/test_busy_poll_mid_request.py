"""limits.busy_poll and a client in the middle of a request: the event loop
does not poll for the rest of a WRITE whose header came alone while the
client waits on nothing else (daemon/session/client_mid_request.hpp). A
raw client sends each 4 KiB WRITE's header, then its payload 200 us later
(a 1 ms poll would find it), and the next WRITE 5 ms after the reply (no
poll finds that one): the daemon's count at exit of polls that found work
stays near zero. Before, about one per WRITE (each payload's). Every WRITE
is answered and reads back.
"""
import re
import struct
import sys
import time

from nbdsched_test import raw_nbd
from nbdsched_test.daemon import Daemon
from nbdsched_test.tempdir import TempDir
from nbdsched_test.verdict import check

CONFIG = """
devices:
  - {name: d0, backend: ram, size: 64MiB}
exports:
  - {name: default, device: d0}
limits: {busy_poll: 1ms, threads: 1}
log_level: info
"""
WRITES = 40


def main():
    with TempDir("midreq") as tmp, Daemon(CONFIG, "midreq", workdir=tmp, control=False) as d:
        s = raw_nbd.connect_export(d.sock)
        answered = read_back = 0
        for i in range(WRITES):
            data = bytes((i * 13 + j) % 251 for j in range(4096))
            s.sendall(struct.pack(">IHHQQI", raw_nbd.REQUEST_MAGIC, 0, raw_nbd.CMD_WRITE, i, i * 4096, 4096))
            time.sleep(0.0002)
            s.sendall(data)
            answered += raw_nbd.read_reply(s, i) == (0, b"")
            time.sleep(0.005)
        for i in range(WRITES):   # as far apart: no poll finds the next one
            raw_nbd.send_request(s, raw_nbd.CMD_READ, 1000 + i, i * 4096, 4096)
            expected = bytes((i * 13 + j) % 251 for j in range(4096))
            read_back += raw_nbd.read_reply(s, 1000 + i, 4096) == (0, expected)
            time.sleep(0.005)
        s.close()
        d.stop()
        log = d.log()
    check(answered == WRITES, "every WRITE is answered")
    check(read_back == WRITES, "every WRITE reads back")
    m = re.search(r"event loop: busy_poll 1000us: (\d+) sleeps avoided, (\d+) sleeps", log)
    check(m is not None, "the daemon reports its busy polling at exit")
    avoided = int(m.group(1)) if m else -1
    print(f"{WRITES} WRITEs with the payload 200 us after the header: {avoided} polls found work")
    # The handshake's polls may find work; the payloads must not be polled for.
    check(0 <= avoided < WRITES // 2, "the loop slept instead of polling for the payloads")
    print("PASS")


if __name__ == "__main__":
    sys.exit(main())
