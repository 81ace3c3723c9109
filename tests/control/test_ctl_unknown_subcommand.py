"""`nbdsched ctl` with a word that names no subcommand says that word is
unknown and lists the valid ones (exit 2, usage); with no word at all it
still says one is required. Before, `ctl bogus` said only "A subcommand is
required", as if nothing had been given. No daemon is needed: ctl refuses
before it connects."""
import subprocess
import sys

from nbdsched_test.daemon import nbdsched_binary
from nbdsched_test.verdict import Checks

VALID = "(list, stats, get, set, weight, faults, reserve, limit, latency-target, reload)"


def ctl(*args):
    return subprocess.run([nbdsched_binary(), "ctl", *args], capture_output=True, text=True, timeout=30)


def main():
    checks = Checks()
    for args, word in ((("bogus",), "bogus"), (("--socket", "/nonexistent", "bogus", "x"), "bogus"),
                       (("--json", "lst"), "lst")):
        r = ctl(*args)
        checks.check(f"ctl {' '.join(args)}: exit 2", r.returncode == 2, f"exit {r.returncode}")
        checks.check(f"ctl {' '.join(args)}: names '{word}' as unknown and lists the valid ones",
                     f"unknown subcommand '{word}' {VALID}" in r.stderr, r.stderr.strip())
    r = ctl("--socket", "/nonexistent")
    checks.check("ctl with no subcommand: exit 2, one is required",
                 r.returncode == 2 and "A subcommand is required" in r.stderr, f"{r.returncode} {r.stderr.strip()}")
    r = ctl("--help")
    checks.check("ctl --help still prints the help", r.returncode == 0 and "SUBCOMMAND" in r.stdout, r.stderr.strip())
    checks.finish()


if __name__ == "__main__":
    sys.exit(main())
