"""The daemon's Prometheus endpoint as the control tests read it."""
import re
import urllib.request


def scrape(port):
    """The endpoint's text now."""
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def sample(text, name, labels):
    """The value of `name{labels}` in scraped `text` (labels as the endpoint
    writes them, e.g. 'device="d0"'), or None."""
    m = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None
