"""`ctl faults DEVICE [on|off]`: fault injection switched at run time.

A write into the device's `faults:` range fails; switched off, the same
write is stored and reads back; a SIGHUP reload with `faults:` unchanged
keeps it off; on again, it fails again. The counts are kept across switches
and equal what `ctl stats` shows under `faults`. A device without `faults:`
and an unknown device are refused with a clear error.
"""
import errno
import json
import sys

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.patterns import pattern
from nbdsched_test.verdict import check

CONFIG = """
devices:
  - {name: d0, backend: ram, size: 16MiB,
     faults: [{op: write, offset: 8MiB, length: 1MiB, error: EIO}]}
  - {name: d1, backend: ram, size: 16MiB}
exports:
  - {name: a, device: d0}
  - {name: b, device: d1}
"""

BAD = 8 << 20   # inside the rule's range


def write_fails(h, data):
    try:
        h.pwrite(data, BAD)
    except nbd.Error as e:
        return e.errnum == errno.EIO
    return False


def faults(d):
    return json.loads(d.ctl("faults", "d0", "--json"))


def check_counts(d, write_errors):
    f = faults(d)
    stats_faults = d.device(d.stats(), "d0")["faults"]
    check(f["faults"] == stats_faults, f"ctl faults shows the counts of ctl stats: {stats_faults}")
    check(f["faults"]["write_errors"] == write_errors and f["faults"]["errors"] == write_errors,
          f"{write_errors} injected write error(s)")


def main():
    with Daemon(CONFIG, "faults") as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("a"))
        old = bytes(4096)
        new = pattern(BAD, 4096)
        check(write_fails(h, new), "a write into the faults: range fails with EIO")
        f = faults(d)
        check(f["device"] == "d0" and f["enabled"] is True and f["rules"] == 1, f"on, one rule: {f}")
        check(d.ctl("faults", "d0").startswith("device d0: faults on, 1 rule\n"), "human output")
        check_counts(d, 1)

        out = d.ctl("faults", "d0", "off")
        check(out.startswith("device d0: faults off, 1 rule\n"), f"switched off: {out.strip()}")
        check(d.wait_log("control: device d0: faults off"), "the switch is logged")
        h.pwrite(new, BAD)
        check(h.pread(len(new), BAD) == new, "off: the same write is stored and reads back")
        check_counts(d, 1)

        d.hup()   # faults: unchanged, so the device and its switch stay
        check(d.wait_log("reload: done"), "reload with faults: unchanged applied")
        check(faults(d)["enabled"] is False, "still off after the reload")
        h.pwrite(new, BAD)

        out = d.ctl("faults", "d0", "on")
        check(out.startswith("device d0: faults on, 1 rule\n"), "switched on again")
        check(write_fails(h, old), "on: the same write fails again")
        check(h.pread(len(new), BAD) == new, "the failed write stored nothing")
        check(h.pread(4096, 0) == old, "reads are not in the rule")
        check_counts(d, 2)
        check(d.device(d.stats(), "d0")["counters"]["errors"] == 2, "the device counted both errors")

        err = d.ctl("faults", "d1", "off", expect=1)
        check("device d1 has no faults: rules" in err, f"a device without faults: {err.strip()}")
        err = d.ctl("faults", "d1", expect=1)
        check("device d1 has no faults: rules" in err, "not even to show")
        err = d.ctl("faults", "nope", "on", expect=1)
        check("no device 'nope'" in err, f"an unknown device: {err.strip()}")
        d.ctl("faults", "d0", "maybe", expect=2)   # CLI: on or off
        check(faults(d)["enabled"] is True, "refused commands changed nothing")
        h.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
