"""A private temporary directory, removed with its contents at the end
unless NBDSCHED_KEEP_TMP is set (to look at logs and configs after a run)."""
import os
import shutil
import tempfile

# Unix socket paths are limited to 107 bytes and daemons put theirs here.
_MAX_BASE = 40


def _base():
    base = tempfile.gettempdir()
    return base if len(base) < _MAX_BASE else "/tmp"


class TempDir:
    """`with TempDir(tag) as path:`, or keep the object: file(name) joins a
    name to it, remove() deletes it."""

    def __init__(self, tag):
        self.path = tempfile.mkdtemp(prefix=f"nbdsched-{tag}-", dir=_base())

    def file(self, name):
        return os.path.join(self.path, name)

    def remove(self):
        if not os.environ.get("NBDSCHED_KEEP_TMP"):
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        self.remove()
