"""cgroup v2 for tests that put a client in a cgroup of their own."""
import os
import time


def cgroup2_root():
    """Where the v2 hierarchy is mounted (unified or hybrid), or None."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(root, "cgroup.procs")) and os.path.exists(
                os.path.join(root, "cgroup.controllers")):
            return root
    return None


def remove_cgroup(path):
    """rmdir, retried for 5 s while the last process leaves it."""
    for _ in range(50):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
