"""A pool's or an image's own configuration (`rbd config pool set`, `rbd
config image set`), which librbd applies at rbd_open over the daemon's
connection settings, on a real one-host cluster:
  - rbd_cache true on the image: start-up fails, naming the image's
    configuration and the command that turns the cache off;
  - rbd_cache true on the pool: the same, naming the pool's; once the
    image says false (the command the message gives), the daemon starts
    and an acknowledged write reads back.
"""
import nbd

from nbdsched_test.ceph import one_rbd_export, run_checks
from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for



def refused(c, name, cluster, tmp, image, words):
    """Starting on `image` fails, the error containing each of `words`."""
    d = Daemon(one_rbd_export(cluster.conf, image), image, workdir=tmp.path, wait=False)
    wait_for(lambda: not d.alive() or "nbdsched: ready" in d.log(), 30)
    status = d.stop()   # one still running started with the cache on
    log = d.log()
    c.check(f"{name}: start-up fails", status not in (0, None), f"status {status}")
    missing = [w for w in words if w not in log]
    c.check(f"{name}: the error says where rbd_cache is on and how to turn it off", not missing,
            f"missing {missing}: {log.strip()[-400:]}")


def cache_checks(c, cluster, tmp):
    cluster.rbd("create", "--size", "16M", "rbd/imgcache")
    cluster.rbd("config", "image", "set", "rbd/imgcache", "rbd_cache", "true")
    refused(c, "rbd_cache true on the image", cluster, tmp, "imgcache",
            ["rbd_cache is true in the image's configuration (rbd config image ls rbd/imgcache)",
             "rbd config image set rbd/imgcache rbd_cache false"])
    cluster.rbd("create", "--size", "16M", "rbd/poolcache")
    cluster.rbd("config", "pool", "set", "rbd", "rbd_cache", "true")
    refused(c, "rbd_cache true on the pool", cluster, tmp, "poolcache",
            ["rbd_cache is true in its pool's configuration (rbd config pool ls rbd)",
             "rbd config image set rbd/poolcache rbd_cache false"])
    cluster.rbd("config", "image", "set", "rbd/poolcache", "rbd_cache", "false")
    d = Daemon(one_rbd_export(cluster.conf, "poolcache"), "poolcache-off", workdir=tmp.path)
    h = nbd.NBD()
    h.connect_uri(d.uri("vol"))
    h.pwrite(b"w" * 4096, 0, nbd.CMD_FLAG_FUA)
    c.check("the image's rbd_cache false over the pool's true: the daemon starts and writes",
            h.pread(4096, 0) == b"w" * 4096)
    h.shutdown()
    d.stop()
    cluster.rbd("config", "pool", "rm", "rbd", "rbd_cache")


if __name__ == "__main__":
    run_checks("rbd-image-config", cache_checks)
