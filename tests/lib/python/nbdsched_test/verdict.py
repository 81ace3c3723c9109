"""How a test says what happened: a skip exits 77 (meson counts it as
skipped, never as passed); check() stops at the first failure; Checks runs
every check and fails at the end, for tests whose later checks still say
something after an earlier one failed."""
import sys


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(77)


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


class Checks:
    """Collects named checks; finish() exits 1 if any failed."""

    def __init__(self):
        self.failed = []

    def check(self, name, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f" ({detail})" if detail else ""))
        if not ok:
            self.failed.append(name)
        return ok

    def clean_up(self, server, tmp):
        """Stops `server` (its log tail shown when a check failed) and
        removes `tmp`."""
        server.stop()
        if self.failed:
            server.print_log_tail()
        tmp.remove()

    def finish(self):
        if self.failed:
            print(f"{len(self.failed)} check(s) failed: {', '.join(self.failed)}")
            sys.exit(1)
        print("all checks passed")
        sys.exit(0)
