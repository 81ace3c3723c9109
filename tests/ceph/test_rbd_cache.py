"""librbd's cache on an RBD device (`rbd_cache:`), on a real one-host
cluster, told apart by what is answered while the OSD is paused (SIGSTOP):
  - off (the default): a plain write waits for the OSD;
  - writearound and writeback: a plain write is answered at once (librbd
    took it; no first FLUSH needed: the daemon turns librbd's
    writethrough-until-flush off), while a FLUSH and a FUA write wait for
    the OSD; once it resumes, they complete and every block reads back;
  - writeback also answers a read of a block it holds from this host's
    memory;
  - the start-up line names the cache in force ("librbd cache writeback").
"""
import signal

import nbd

from nbdsched_test.ceph import completed_within, rbd_config, run_checks
from nbdsched_test.daemon import Daemon

BLOCK = 4096
WAIT = 3       # seconds a request that waits for the paused OSD is given (and must not complete in)
ANSWER = 10    # seconds a request answered by librbd itself may take on a loaded host


def data(tag):
    return bytes([tag]) * BLOCK


def write(h, block, tag, flags=0):
    return h.aio_pwrite(nbd.Buffer.from_bytearray(bytearray(data(tag))), block * BLOCK, flags=flags)


def mode_checks(c, cluster, tmp, mode):
    image = f"img{mode}"
    cluster.rbd("create", "--size", "16M", f"rbd/{image}")
    dev = rbd_config("vol", image, cluster.conf, rotational="false", **({} if mode == "off" else {"rbd_cache": mode}))
    d = Daemon(f"devices:\n  - {dev}\nexports:\n  - {{name: vol, device: vol}}\n", f"cache-{mode}", workdir=tmp.path)
    h = nbd.NBD()
    h.connect_uri(d.uri("vol"))
    line = next((x for x in d.log().splitlines() if "device vol: rbd " in x and "scheduler" in x), "")
    named = bool(line) and ("librbd cache" not in line if mode == "off" else f"librbd cache {mode}," in line)
    c.check(f"{mode}: the start-up line names the cache in force", named, line)
    h.pwrite(data(1), 0, nbd.CMD_FLAG_FUA)   # the object exists before the pause
    cluster.signal_osd(signal.SIGSTOP)
    cookies = []
    try:
        plain = write(h, 1, 2)
        cookies.append(plain)
        if mode == "off":
            c.check("off: a plain write waits for the paused OSD", not completed_within(h, plain, WAIT))
        else:
            c.check(f"{mode}: a plain write is answered while the OSD is paused",
                    completed_within(h, plain, ANSWER))
            cookies.remove(plain)
            if mode == "writeback":
                buf = nbd.Buffer(BLOCK)
                read = h.aio_pread(buf, BLOCK)
                cookies.append(read)
                c.check("writeback: a read of a block it holds is answered from this host's memory",
                        completed_within(h, read, ANSWER) and buf.to_bytearray() == data(2))
                cookies.remove(read)
            flush = h.aio_flush()
            cookies.append(flush)
            c.check(f"{mode}: a FLUSH waits for the paused OSD", not completed_within(h, flush, WAIT))
            fua = write(h, 2, 3, nbd.CMD_FLAG_FUA)
            cookies.append(fua)
            c.check(f"{mode}: a FUA write waits for the paused OSD", not completed_within(h, fua, WAIT))
    finally:
        cluster.signal_osd(signal.SIGCONT)
    c.check(f"{mode}: once the OSD resumes, every request completes",
            all(completed_within(h, cookie, 60) for cookie in cookies))
    c.check(f"{mode}: the blocks read back", h.pread(3 * BLOCK, 0) == data(1) + data(2) + (
        bytes(BLOCK) if mode == "off" else data(3)))
    h.shutdown()
    d.stop()


def cache_checks(c, cluster, tmp):
    for mode in ("off", "writearound", "writeback"):
        mode_checks(c, cluster, tmp, mode)


if __name__ == "__main__":
    run_checks("rbd-cache", cache_checks)
