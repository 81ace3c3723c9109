"""Prometheus naming: nbdsched_device_injected_errors_total spells its op
label as requests_total does (write_zeroes, not zeroes), so injected and
completed join on(op); and process_start_time_seconds tells when the
process started, so a restart is not only counters going back to 0.
"""
import re
import sys
import time
import urllib.request

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import free_port, wait_for
from nbdsched_test.verdict import check

CONFIG = """
metrics: 127.0.0.1:{port}
devices:
  - name: d0
    backend: ram
    size: 16MiB
    faults: [{{op: write, offset: 8MiB, length: 1MiB, error: EIO}}]
exports: [{{name: e, device: d0}}]
"""


def main():
    port = free_port()
    started = time.time()
    with Daemon(CONFIG.format(port=port), "metrics-names") as d:
        text = ""

        def scraped():
            nonlocal text
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            return "nbdsched_device_injected_errors_total" in text
        check(wait_for(scraped, 10, step=0.2), "the device's injected errors are exported")
        injected = set(re.findall(r'^nbdsched_device_injected_errors_total\{device="d0",op="([a-z_]+)"\}', text, re.M))
        completed = set(re.findall(r'^nbdsched_device_requests_total\{device="d0",op="([a-z_]+)"\}', text, re.M))
        check(injected == completed == {"read", "write", "flush", "trim", "write_zeroes"},
              f"injected and completed use the same op labels: {sorted(injected)} / {sorted(completed)}")
        m = re.search(r"^process_start_time_seconds (\S+)$", text, re.M)
        check(m is not None, "process_start_time_seconds is exported")
        value = float(m.group(1))
        check(started - 5 <= value <= time.time() + 1, f"... and is when the daemon started: {value} (~{started})")
        check(d.stop() == 0, "clean stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
