"""librados' thread pool inside the daemon (io_context_pool: librbd's
dispatch and every completion run there), on a real one-host cluster:
  - by default the daemon connects with one such thread (librados' own
    default is two, which wake each other per request: docs/rbd.md);
  - `librados thread count = 3` in the device's ceph.conf stands: three;
  - with one, a FUA write and a read of it are answered.
"""
import os

import nbd

from nbdsched_test.ceph import conf_with, one_rbd_export, run_checks
from nbdsched_test.daemon import Daemon


def pool_threads(pid):
    """How many of the process's threads librados named io_context_pool."""
    count = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                count += f.read().strip() == "io_context_pool"
        except OSError:   # the thread ended
            pass
    return count


def thread_checks(c, cluster, tmp):
    cluster.rbd("create", "--size", "16M", "rbd/imgthreads")
    d = Daemon(one_rbd_export(cluster.conf, "imgthreads"), "threads-default", workdir=tmp.path)
    h = nbd.NBD()
    h.connect_uri(d.uri("vol"))
    h.pwrite(b"t" * 4096, 0, nbd.CMD_FLAG_FUA)
    c.check("one librados thread: a FUA write reads back", h.pread(4096, 0) == b"t" * 4096)
    n = pool_threads(d.pid)
    c.check("by default the daemon runs librados with one io_context_pool thread", n == 1, f"{n} threads")
    h.shutdown()
    d.stop()

    conf = conf_with(cluster.conf, "librados thread count = 3", "threads")
    d = Daemon(one_rbd_export(conf, "imgthreads"), "threads-conf", workdir=tmp.path)
    n = pool_threads(d.pid)
    c.check("ceph.conf's librados thread count = 3 stands", n == 3, f"{n} threads")
    d.stop()


if __name__ == "__main__":
    run_checks("rbd-threads", thread_checks)
