"""The Prometheus endpoint (metrics: HOST:PORT) serves the same counters as
`ctl stats`, per device, export and group, and a RAM device's memory: up
with the data a client writes, down again when it TRIMs it. A HEAD of
/metrics (curl -I, an HTTP health check) is answered as the GET is."""
import sys
import urllib.error
import urllib.request

import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.metrics import sample, scrape
from nbdsched_test.process import free_port, wait_for
from nbdsched_test.verdict import check


def scrape_until(port, want, timeout=10):
    """The endpoint's text once it has `want` (the snapshot is refreshed
    every second), else its last text."""
    text = ""

    def has_it():
        nonlocal text
        text = scrape(port)
        return want in text
    wait_for(has_it, timeout, step=0.2)
    return text


def gauge(port, name, device):
    """A device's gauge as the endpoint shows it now, or None."""
    return sample(scrape(port), name, f'device="{device}"')


def memory_shown(d, port, device, want):
    """ctl stats' memory_bytes of the device once the gauge shows the same
    number and `want(number)` holds (the snapshot is refreshed every
    second), else what ctl stats last said."""
    seen = None

    def agree():
        nonlocal seen
        seen = d.device(d.stats(), device).get("memory_bytes")
        return seen is not None and want(seen) and gauge(port, "nbdsched_device_memory_bytes", device) == seen
    wait_for(agree, 10, step=0.2)
    return seen


def check_head(port):
    """HEAD /metrics: 200 and the GET's type, no body; another path is still 404."""
    try:
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/metrics", method="HEAD"),
                                    timeout=5) as r:
            status, kind, body = r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        status, kind, body = e.code, "", b""
    check(status == 200, f"HEAD /metrics: status {status}, want 200")
    check(kind.startswith("text/plain"), f"HEAD /metrics: Content-Type '{kind}'")
    check(body == b"", f"HEAD /metrics: no body ({len(body)} bytes)")
    try:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/other", method="HEAD"), timeout=5)
        status = 200
    except urllib.error.HTTPError as e:
        status = e.code
    check(status == 404, f"HEAD /other: status {status}, want 404")


def check_expirations(d, port):
    """bfq's expirations per reason: the same numbers in ctl stats and in the
    counter family, for the device and the group. On RAM (slice_idle 0, one
    group) bfq never idles: the client's queue ends its turns empty."""
    dev = d.device(d.stats(), "d0")
    ended = dev["sched"]["expired_no_more_requests"]
    check(ended >= 1, f"turns ended no_more_requests: {ended}")
    want = f'nbdsched_group_expirations_total{{device="d0",group="gold",reason="no_more_requests"}} {ended}'
    text = scrape_until(port, want)
    check(want in text, f"group expirations counter: {want}")
    check(f'nbdsched_device_expirations_total{{device="d0",reason="no_more_requests"}} {ended}' in text,
          "device expirations counter")
    check('nbdsched_device_expirations_total{device="d0",reason="too_idle"} 0' in text, "no too_idle expiry")
    check(isinstance(dev["queues"][0]["sched"].get("io_bound"), bool), f"the bfq queue's IO_bound: {dev['queues']}")


def check_memory(d, port):
    """8 MiB written to the plain RAM device d1 (received in place) shows in
    ctl stats (JSON and table) and the gauge; a TRIM of it gives it back."""
    mib = 1 << 20
    h = nbd.NBD()
    h.connect_uri(d.uri("b"))
    before = memory_shown(d, port, "d1", lambda m: True)
    check(before is not None and before < mib, f"d1 before any write: memory_bytes {before} < 1 MiB")
    for i in range(8):
        h.pwrite(bytes([0xa5]) * mib, i * mib)
    written = memory_shown(d, port, "d1", lambda m: m >= 8 * mib)
    check(written is not None and 8 * mib <= written < 9 * mib,
          f"8 MiB written: ctl stats memory_bytes {written} in [8, 9) MiB, the gauge the same")
    line = next((l for l in d.ctl("stats").splitlines() if l.startswith("device d1 ")), "")
    check(", memory 8.0MiB" in line, f"ctl stats' table shows the memory in MiB: {line!r}")
    h.trim(8 * mib, 0)
    trimmed = memory_shown(d, port, "d1", lambda m: m < mib)
    check(trimmed is not None and trimmed < mib,
          f"after a TRIM of the 8 MiB: memory_bytes {trimmed} < 1 MiB, the gauge the same")
    h.shutdown()
    # Through the fault wrapper too: d0 reports its RAM's memory.
    shown = memory_shown(d, port, "d0", lambda m: True)
    check(shown is not None, "d0 (RAM with faults:) has memory_bytes and the same gauge")


def main():
    port = free_port()
    config = f"""
metrics: 127.0.0.1:{port}
devices:
  - {{name: d0, backend: ram, size: 16MiB, scheduler: bfq,
      faults: [{{op: write, offset: 8MiB, length: 1MiB, error: EIO}}]}}
  - {{name: d1, backend: ram, size: 64MiB}}
exports:
  - {{name: a, device: d0, group: gold}}
  - {{name: b, device: d1, group: gold}}
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
        check_expirations(d, port)
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
        check_head(port)
        check_memory(d, port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
