"""`nbdsched ctl reload --pid` (the shipped ExecReload) falls back to SIGHUP
only when it cannot connect to the control socket. Once the request is
sent, the daemon may be acting on it: a slow answer is waited for (80 s by
default), and a timeout is exit 1 saying the daemon did not answer -- never
a SIGHUP on top (a second reload) and exit 0 for a reload that was refused.
A stopped daemon (SIGSTOP) stands in for a loaded one.
"""
import signal
import subprocess
import sys
import threading

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import wait_for
from nbdsched_test.verdict import check

BASE = """
devices:
  - {{name: d0, backend: ram, size: {size}, scheduler: cfq}}
exports:
  - {{name: a, device: d0}}
"""


def reload_while_stopped(d, seconds, *extra):
    """ctl reload --pid with the daemon stopped for `seconds`; its result."""
    d.send(signal.SIGSTOP)
    resume = threading.Timer(seconds, lambda: d.send(signal.SIGCONT))
    resume.start()
    try:
        return subprocess.run([d.binary, "ctl", "--socket", d.control, *extra, "reload", "--pid", str(d.pid)],
                              capture_output=True, text=True, timeout=120)
    finally:
        resume.join()


def reloads(d):
    return d.log().count("SIGHUP: reloading")


def main():
    with Daemon(BASE.format(size="32MiB"), "ctl-reload-slow") as d:
        d.write_config(BASE.format(size="64MiB"))   # needs a restart: refused
        # Stopped longer than the 10 s a query waits: the reload waits on.
        r = reload_while_stopped(d, 12)
        check(r.returncode == 1 and "size cannot change without a restart" in r.stderr,
              f"a slow daemon's refusal is waited for and reported (exit 1): {r.returncode} {r.stderr.strip()}")
        check("SIGHUP" not in r.stderr, f"no SIGHUP after the request was sent: {r.stderr.strip()}")
        check(wait_for(lambda: "reload refused" in d.log(), 10), "the daemon refused it")
        check(not wait_for(lambda: reloads(d) > 1, 2), f"the daemon reloaded once, not twice: {reloads(d)}")

        # A shorter wait than the daemon takes: an error, no SIGHUP.
        before = reloads(d)
        r = reload_while_stopped(d, 4, "--timeout", "1")
        check(r.returncode == 1 and "did not answer within 1 s" in r.stderr and "may still take effect" in r.stderr,
              f"a timeout after sending is exit 1 and says so: {r.returncode} {r.stderr.strip()}")
        check("SIGHUP" not in r.stderr, f"no SIGHUP after a timeout: {r.stderr.strip()}")
        check(wait_for(lambda: reloads(d) == before + 1, 10), "the request sent was still read and handled once")
        check(not wait_for(lambda: reloads(d) > before + 1, 2), f"and only once: {reloads(d) - before}")
        check(d.stop() == 0, "clean stop")

    # Nobody listening on the control socket: SIGHUP, as before.
    with Daemon(BASE.format(size="32MiB"), "ctl-reload-nosock", control=False) as d:
        sock = d.file("nobody.sock")
        open(sock, "w").close()   # a file, not a listening socket: connect fails
        r = subprocess.run([d.binary, "ctl", "--socket", sock, "reload", "--pid", str(d.pid)], capture_output=True,
                           text=True, timeout=30)
        check(r.returncode == 0 and "sent SIGHUP" in r.stderr, f"connect fails: SIGHUP: {r.returncode} {r.stderr}")
        check(wait_for(lambda: reloads(d) == 1, 10), "... and the daemon reloaded")
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
