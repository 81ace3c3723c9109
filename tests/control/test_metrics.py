"""The Prometheus endpoint (metrics: HOST:PORT) serves the same counters as
`ctl stats`, per device, export and group."""
import sys
import urllib.request

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.process import free_port, wait_for
from nbdsched_test.verdict import check


def scrape_until(port, want, timeout=10):
    """The endpoint's text once it has `want` (the snapshot is refreshed
    every second), else its last text."""
    text = ""

    def has_it():
        nonlocal text
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        return want in text
    wait_for(has_it, timeout, step=0.2)
    return text


def main():
    port = free_port()
    config = f"""
metrics: 127.0.0.1:{port}
devices:
  - {{name: d0, backend: ram, size: 16MiB, scheduler: bfq,
      faults: [{{op: write, offset: 8MiB, length: 1MiB, error: EIO}}]}}
exports:
  - {{name: a, device: d0, group: gold}}
groups:
  - {{name: gold, weight: 700}}
"""
    with Daemon(config, "metrics") as d:
        h = nbd.NBD()
        h.connect_uri(d.uri("a"))
        for i in range(10):
            h.pread(4096, i * 4096)
        for i in range(3):
            h.pwrite(bytearray(512), i * 512)
        want = 'nbdsched_export_requests_total{device="d0",export="a",op="read"} 10'
        text = scrape_until(port, want)
        check(want in text, "export read count")
        check('nbdsched_group_requests_total{device="d0",group="gold",op="write"} 3' in text, "group write count")
        check('nbdsched_device_bytes_total{device="d0",op="read"} 40960' in text, "device read bytes")
        check('nbdsched_group_weight{device="d0",group="gold"} 700' in text, "group weight gauge")
        check('nbdsched_device_latency_seconds{device="d0",quantile="0.99"}' in text, "latency summary")
        check('nbdsched_device_inflight_waits_total{device="d0"} 0' in text, "in-flight line counter")
        # A write into the failing range: the injected error shows per operation.
        try:
            h.pwrite(bytearray(512), 8 << 20)
            check(False, "write into the faults: range should fail")
        except nbd.Error:
            pass
        want = 'nbdsched_device_injected_errors_total{device="d0",op="write"} 1'
        text = scrape_until(port, want)
        check(want in text, "injected write error counter")
        check('nbdsched_device_injected_errors_total{device="d0",op="read"} 0' in text, "no injected read errors")
        h.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
