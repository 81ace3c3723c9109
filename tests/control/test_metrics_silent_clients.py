"""Clients that connect to the metrics port and send nothing do not hold
scrapes back. The endpoint has 8 workers and a 3 s request timeout
(daemon/metrics/endpoint.cpp); with civetweb's defaults as before (one
worker, 30 s) a single silent connection delayed every scrape ~30 s.

The bounds are generous on purpose (a scrape alone takes milliseconds, the
old behaviour took 30 s): what is checked is "not held for the old 30 s",
not a speed."""
import socket
import sys
import time
import urllib.request

from nbdsched_test.daemon import Daemon, one_ram_export
from nbdsched_test.process import free_port
from nbdsched_test.verdict import check

WORKERS = 8   # the endpoint's num_threads


def silent_connections(port, n):
    """n TCP connections to the port, each sending nothing."""
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        conns.append(s)
    return conns


def scrape(port, timeout):
    """(HTTP status, seconds taken), or (None, seconds) when it timed out."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            r.read()
            return r.status, time.monotonic() - start
    except OSError as e:
        print(f"scrape failed: {e}")
        return None, time.monotonic() - start


def closed_by_server_within(s, limit):
    """Seconds until the server closed this silent connection, or None if
    it was still open after `limit` seconds."""
    start = time.monotonic()
    s.settimeout(limit)
    try:
        data = s.recv(4096)   # b'' at EOF; civetweb may send a 408 first
        while data:
            data = s.recv(4096)
    except socket.timeout:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def main():
    port = free_port()
    config = f"metrics: 127.0.0.1:{port}\n" + one_ram_export("16MiB")
    with Daemon(config, "metrics_silent") as d:
        status, alone = scrape(port, 10)
        check(status == 200, f"a scrape alone answers 200 ({alone:.3f} s)")

        # Fewer silent clients than workers: a scrape does not wait for them.
        conns = silent_connections(port, WORKERS - 2)
        time.sleep(0.3)   # let civetweb hand each to a worker
        status, took = scrape(port, 5)
        check(status == 200, f"with {len(conns)} silent connections open a scrape answers within 5 s "
                             f"(status {status}, {took:.3f} s; alone {alone:.3f} s; 30 s before)")

        # A silent client is dropped after the request timeout, not civetweb's 30 s.
        waited = closed_by_server_within(conns[0], 15)
        check(waited is not None, "the daemon closes a silent connection within 15 s"
                                  + (f" (after {waited:.1f} s)" if waited is not None else ""))
        for s in conns:
            s.close()

        # More silent clients than workers: each holds a worker for the
        # request timeout only, so a scrape queued behind them answers after
        # about 2 x 3 s, within Prometheus' default scrape_timeout (10 s).
        conns = silent_connections(port, 2 * WORKERS)
        time.sleep(0.3)
        status, took = scrape(port, 20)
        check(status == 200, f"with {len(conns)} silent connections (2 x the workers) a scrape still answers "
                             f"within 20 s (status {status}, {took:.3f} s)")
        for s in conns:
            s.close()
        d.ctl("list")   # the daemon itself is fine
    return 0


if __name__ == "__main__":
    sys.exit(main())
