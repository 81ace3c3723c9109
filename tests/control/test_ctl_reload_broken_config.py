"""`nbdsched ctl --config FILE reload --pid PID` (the shipped ExecReload)
with a FILE that does not load: it prints the file's errors with
file:line:col and exits 1, as the daemon would refuse that file, and sends
no SIGHUP. Before, it printed the errors, fell back to SIGHUP and exited 0:
`systemctl reload` reported success for a file the daemon then refused.
Checked on a daemon without a control socket (where --pid matters) and on
one with a socket (the socket's address is in the file that does not load)."""
import subprocess
import sys
import time

from nbdsched_test.daemon import Daemon
from nbdsched_test.verdict import Checks

CONFIG = """devices:
  - {name: d0, backend: ram, size: 16MiB, scheduler: cfq}
exports:
  - {name: a, device: d0}
"""
BROKEN = "devices: [this is: not valid\n"


def reload_by_config(d):
    return subprocess.run([d.binary, "ctl", "--config", d.config_path, "reload", "--pid", str(d.pid)],
                          capture_output=True, text=True, timeout=30)


def main():
    checks = Checks()
    for control in (False, True):
        tag = "with a control socket" if control else "without a control socket"
        with Daemon(CONFIG, "ctl_reload_broken_config", control=control) as d:
            with open(d.config_path, "w") as f:
                f.write(BROKEN)
            r = reload_by_config(d)
            checks.check(f"{tag}: exit 1", r.returncode == 1, f"exit {r.returncode}: {r.stderr.strip()}")
            checks.check(f"{tag}: the file's errors with file:line:col", ".yaml:2:1: YAML syntax error" in r.stderr,
                         r.stderr.strip())
            checks.check(f"{tag}: no SIGHUP sent", "sent SIGHUP" not in r.stderr and "no SIGHUP sent" in r.stderr,
                         r.stderr.strip())
            time.sleep(0.3)
            checks.check(f"{tag}: the daemon did not reload", "SIGHUP: reloading" not in d.log(), d.log_tail(5))
            checks.check(f"{tag}: the daemon still runs", d.alive())
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
