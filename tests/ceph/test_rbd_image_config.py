"""A pool's or an image's own configuration (`rbd config pool set`, `rbd
config image set`), which librbd applies at rbd_open over the daemon's
connection settings, on a real one-host cluster:
  - rbd_cache true on the image: start-up fails, naming the image's
    configuration and the command that turns the cache off;
  - rbd_cache true on the pool: the same, naming the pool's; once the
    image says false (the command the message gives), the daemon starts
    and an acknowledged write reads back.
With the device's own `rbd_cache: writearound` or `writeback`:
  - rbd_cache true on the image: no refusal, the cache asked for runs;
  - rbd_cache false on the image or on the pool: the daemon starts without
    the cache, and its log says so and how to have it;
  - another rbd_cache_policy on the image: that policy runs, and the log
    says so.
"""
import nbd

from nbdsched_test.ceph import one_rbd_export, rbd_config, run_checks
from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for



def refused(c, name, cluster, tmp, image, words, key="rbd_cache"):
    """Starting on `image` fails, the error containing each of `words`."""
    d = Daemon(one_rbd_export(cluster.conf, image), image, workdir=tmp.path, wait=False)
    wait_for(lambda: not d.alive() or "nbdsched: ready" in d.log(), 30)
    status = d.stop()   # one still running started with the image's setting
    log = d.log()
    c.check(f"{name}: start-up fails", status not in (0, None), f"status {status}")
    missing = [w for w in words if w not in log]
    c.check(f"{name}: the error says where {key} is set and how to undo it", not missing,
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


def started(c, name, cluster, tmp, image, cache, runs, words=()):
    """The daemon starts on `image` with the device's rbd_cache `cache`, its
    start-up line names the librbd cache `runs` ("" = none), its log has each
    of `words` (and no warning about rbd_cache without them), and a FUA
    write reads back."""
    dev = rbd_config("vol", image, cluster.conf, rbd_cache=cache)
    d = Daemon(f"devices:\n  - {dev}\nexports:\n  - {{name: vol, device: vol}}\n", f"{image}-{cache}",
               workdir=tmp.path)
    h = nbd.NBD()
    h.connect_uri(d.uri("vol"))
    h.pwrite(b"c" * 4096, 4096, nbd.CMD_FLAG_FUA)
    c.check(f"{name}: the daemon starts and writes", h.pread(4096, 4096) == b"c" * 4096)
    h.shutdown()
    d.stop()
    log = d.log()
    line = next((x for x in log.splitlines() if "device vol: rbd " in x and "scheduler" in x), "")
    c.check(f"{name}: the start-up line names the cache in force ({runs or 'none'})",
            (f"librbd cache {runs}," in line) if runs else bool(line) and "librbd cache" not in line, line)
    missing = [w for w in words if w not in log]
    c.check(f"{name}: the log says what the image's configuration changed", not missing,
            f"missing {missing}: {log.strip()[-600:]}" if missing else "")
    if not words:
        c.check(f"{name}: no warning about the cache", "outranks" not in log,
                "" if "outranks" not in log else log.strip()[-600:])


def cache_on_checks(c, cluster, tmp):
    # imgcache has rbd_cache true in its own configuration (cache_checks).
    started(c, "rbd_cache true on the image, writearound on the device", cluster, tmp, "imgcache",
            "writearound", "writearound")
    cluster.rbd("config", "image", "set", "rbd/imgcache", "rbd_cache_policy", "writeback")
    started(c, "rbd_cache_policy writeback on the image, writearound on the device", cluster, tmp, "imgcache",
            "writearound", "writeback",
            ["rbd rbd/imgcache: rbd_cache_policy is writeback in the image's configuration (rbd config image ls "
             "rbd/imgcache), which outranks the device's rbd_cache: writearound",
             "rbd config image rm rbd/imgcache rbd_cache_policy"])
    # poolcache has rbd_cache false in its own configuration (cache_checks).
    started(c, "rbd_cache false on the image, writeback on the device", cluster, tmp, "poolcache", "writeback", "",
            ["rbd rbd/poolcache: rbd_cache is false in the image's configuration (rbd config image ls "
             "rbd/poolcache), which outranks the device's rbd_cache: writeback: librbd's cache is off",
             "rbd config image rm rbd/poolcache rbd_cache"])
    cluster.rbd("config", "image", "rm", "rbd/poolcache", "rbd_cache")
    cluster.rbd("config", "pool", "set", "rbd", "rbd_cache", "false")
    started(c, "rbd_cache false on the pool, writeback on the device", cluster, tmp, "poolcache", "writeback", "",
            ["rbd_cache is false in its pool's configuration (rbd config pool ls rbd)",
             "rbd config pool rm rbd rbd_cache"])
    cluster.rbd("config", "pool", "rm", "rbd", "rbd_cache")


def write_copy_checks(c, cluster, tmp):
    key = "rbd_disable_zero_copy_writes"
    cluster.rbd("create", "--size", "16M", "rbd/imgcopy")
    cluster.rbd("config", "image", "set", "rbd/imgcopy", key, "false")
    refused(c, f"{key} false on the image", cluster, tmp, "imgcopy",
            [f"rbd rbd/imgcopy: {key} is false in the image's configuration (rbd config image ls rbd/imgcopy)",
             "once this daemon is fenced", f"rbd config image rm rbd/imgcopy {key}"], key)
    cluster.rbd("create", "--size", "16M", "rbd/poolcopy")
    cluster.rbd("config", "pool", "set", "rbd", key, "false")
    refused(c, f"{key} false on the pool", cluster, tmp, "poolcopy",
            [f"rbd rbd/poolcopy: {key} is false in its pool's configuration (rbd config pool ls rbd)",
             f"rbd config pool rm rbd {key}", f"rbd config image set rbd/poolcopy {key} true"], key)
    cluster.rbd("config", "image", "set", "rbd/poolcopy", key, "true")
    d = Daemon(one_rbd_export(cluster.conf, "poolcopy"), "poolcopy-true", workdir=tmp.path)
    h = nbd.NBD()
    h.connect_uri(d.uri("vol"))
    h.pwrite(b"z" * 4096, 0, nbd.CMD_FLAG_FUA)
    c.check(f"the image's {key} true over the pool's false: the daemon starts and writes",
            h.pread(4096, 0) == b"z" * 4096)
    h.shutdown()
    d.stop()
    cluster.rbd("config", "pool", "rm", "rbd", key)


if __name__ == "__main__":
    run_checks("rbd-image-config", cache_checks, cache_on_checks, write_copy_checks)
