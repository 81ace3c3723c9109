"""Tables, verdict and plot of experiment 11 (kept apart from the runner)."""

import common
import report

SERVERS = ["nbdsched", "nbdsched-tls", "nbdkit", "nbdkit-tls"]
LABELS = {"nbdsched": "nbdsched", "nbdsched-tls": "nbdsched TLS", "nbdkit": "nbdkit", "nbdkit-tls": "nbdkit TLS"}
TRANSPORTS = ["unix", "tcp"]
WORKLOADS = [("randread", 4096, 64), ("read", 1 << 20, 8)]


def wl_name(w):
    rw, bs, qd = w
    return f"{'4k' if bs == 4096 else '1M'} {rw} qd{qd}"


def _unit(w):
    return "IOPS" if w[0] == "randread" else "MiB/s"


def _get(med, server, tr, w, field=0):
    m = med.get((server, tr, w))
    return m[field] if m else None


def _fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def _ratio(a, b):
    return a / b if a and b else None


def _paired(samples, a, b, tr, w):
    """a's throughput over b's: the median of the repetitions' ratios (the
    clients ran back to back in each repetition); None without a pair."""
    num, den = ({rep: m[0] for rep, m in samples.get((s, tr, w), {}).items()} for s in (a, b))
    return common.ratio_by_rep(num, den)


def _cost(tls, plain):
    """Throughput lost to TLS, as a share of the plaintext throughput."""
    return f"{1 - tls / plain:+.0%}" if tls and plain else "-"


def _cells():
    return [(w, tr) for w in WORKLOADS for tr in TRANSPORTS]


def _throughput(med, samples):
    rows = []
    for w, tr in _cells():
        v = {s: _get(med, s, tr, w) for s in SERVERS}
        r = _paired(samples, "nbdsched-tls", "nbdkit-tls", tr, w)
        rows.append((f"{wl_name(w)} {tr} ({_unit(w)})", _fmt(v["nbdsched"]), _fmt(v["nbdsched-tls"]),
                     _cost(v["nbdsched-tls"], v["nbdsched"]), _fmt(v["nbdkit"]), _fmt(v["nbdkit-tls"]),
                     _cost(v["nbdkit-tls"], v["nbdkit"]), f"**{r:.2f}x**" if r else "-"))
    return report.table(["workload, transport", "nbdsched", "nbdsched TLS", "TLS cost", "nbdkit", "nbdkit TLS",
                         "TLS cost", "nbdsched TLS / nbdkit TLS"], rows)


def _cpu(med):
    rows = []
    for w, tr in _cells():
        per = "us per 4k read" if w[0] == "randread" else "us per 1 MiB read"
        rows.append([f"{wl_name(w)} {tr} ({per})"] + [_fmt(_get(med, s, tr, w, 1), 1) for s in SERVERS]
                    + [" / ".join(_fmt(_get(med, s, tr, w, 2), 2) for s in SERVERS)])
    return report.table(["workload, transport"] + [LABELS[s] for s in SERVERS]
                        + ["client CPU (cores), same order"], rows)


def _client_check(med):
    rows = []
    for w in WORKLOADS:
        tool = _get(med, "nbdsched", "unix", w)
        f = _get(med, "fio", "unix", w)
        name = "nbdload.py (Python libnbd)" if w[0] == "randread" else "nbdcopy"
        rows.append((f"{wl_name(w)} ({_unit(w)})", name, _fmt(tool), _fmt(f), f"{tool / f:.2f}" if tool and f else "-",
                     _fmt(_get(med, "nbdsched", "unix", w, 2), 2), _fmt(_get(med, "fio", "unix", w, 2), 2)))
    return report.table(["workload", "client", "client's throughput", "fio nbd engine", "client / fio",
                         "client CPU (cores)", "fio CPU (cores)"], rows)


def _verdict(med, failures, samples):
    ratios = {(w, tr): _paired(samples, "nbdsched-tls", "nbdkit-tls", tr, w) for w, tr in _cells()}
    met = sum(1 for r in ratios.values() if r and r >= 1)
    text = ("Goal: nbdsched with TLS at least as fast as nbdkit with TLS. nbdsched TLS / nbdkit TLS: "
            + ", ".join(f"{wl_name(w)} {tr} **{r:.2f}x**" if r else f"{wl_name(w)} {tr} -"
                        for (w, tr), r in ratios.items())
            + f": **{'met' if met == len(ratios) else f'met in {met} of {len(ratios)} cells'}**.")
    costs = [(s, w, tr, _get(med, s, tr, w), _get(med, s.replace("-tls", ""), tr, w))
             for s in ("nbdsched-tls", "nbdkit-tls") for w, tr in _cells()]
    text += ("\n\nWhat TLS costs each server (throughput lost against its own plaintext run): "
             + "; ".join(f"{LABELS[s]} {wl_name(w)} {tr} {_cost(t, p)}" for s, w, tr, t, p in costs) + ".")
    if failures:
        text += ("\n\nRuns that failed (the cell's median is over the other repetitions): " + "; ".join(failures))
    return text, ratios, met


def _sessions(sessions, speeds):
    text = report.table(["server", "transport", "what libnbd reports (`LIBNBD_DEBUG=1 nbdinfo`)"],
                        [(LABELS[k[0]], k[1], v) for k, v in sessions.items()])
    text += ("\n\nThe client (GnuTLS in libnbd) offers AES-256-GCM first, which a TLS 1.3 PSK bound to "
             "SHA-256 cannot use (see daemon/session/tls_context.cpp); nbdkit (GnuTLS) takes the client's "
             "next choice, nbdsched (OpenSSL) its own first, AES-128-GCM.")
    if speeds:
        text += (" The ciphers alone on this machine (`openssl speed -evp CIPHER -bytes 16384`, one core): "
                 + ", ".join(f"{c} {v:,.0f} MiB/s ({1e6 / v:,.0f} us per MiB)" for c, v in speeds.items() if v)
                 + ": compare the TLS servers' CPU per 1 MiB read above, less their plaintext CPU.")
    return text


def write(name, quick, facts, med, reps, runtime, size, commands, failures, sessions, speeds, samples):
    """med: {(server, transport, workload): medians}; samples: the same keys,
    {repetition: numbers}, which the nbdsched TLS / nbdkit TLS ratios pair."""
    from exp11_tls import __doc__ as doc
    verdict, ratios, met = _verdict(med, failures, samples)
    sections = [
        (None, doc.strip()),
        ("Throughput (median of the repetitions)", _throughput(med, samples) + "\n\n`TLS cost`: throughput "
         "lost against the same server in plaintext (positive = slower with TLS). nbdsched TLS / nbdkit TLS: the "
         "median of the repetitions' ratios."),
        ("Server CPU per request (median)", _cpu(med) + "\n\nThe server process's utime+stime (all its threads) "
         "over one client run, connection and TLS handshake included, divided by the requests served. nbdkit "
         "runs 16 worker threads; nbdsched, with the one device here, serves every connection on that device's "
         "event loop thread (docs/threads.md). Client CPU: the client "
         "process's CPU seconds over its measured seconds (1.00 = one core busy; the Python client's "
         "includes its start-up, about 0.1 s)."),
        ("Are the clients the limit?", _client_check(med) + "\n\nThe same load on plaintext nbdsched over the "
         "Unix socket through fio's nbd engine (C, libnbd) and through this experiment's client, in the same "
         "rotation. Near 1: the client is not what limits the plaintext numbers (TLS runs are slower still). "
         "Below 1: it limits the plaintext rate, so the TLS cost in that row is understated; both servers "
         "face the same client, and the server CPU per request does not depend on it."),
        ("Verdict", verdict),
        ("TLS sessions", _sessions(sessions, speeds)),
        ("Method", f"{reps} repetitions; the 4k load runs {runtime} s per server (nbdload.py, 64 requests in "
         f"flight, random offsets over the whole export, one connection); the 1 MiB load reads the whole "
         f"{size >> 20} MiB export once with `nbdcopy --no-extents --connections=1 --requests=8 "
         "--request-size=1048576 URI null:` (its wall time, process start and handshake included). "
         "RAM everywhere, sparse and never written (reads return zeros; TLS encrypts them all the same): "
         f"nbdsched `backend: ram`, scheduler `none`; `nbdkit memory {size >> 20}M`. One key file made by "
         "`psktool` serves both servers (identity `alice`); clients connect with "
         "`nbds+unix://alice@/x?socket=SOCK&tls-psk-file=FILE` and `nbds://alice@127.0.0.1:PORT/x?tls-psk-file=FILE`."),
    ]
    labels = [f"{wl_name(w).split()[0]} qd{w[2]} {tr}" for w, tr in _cells()]
    series = [(LABELS[s], [(_ratio(_get(med, s, tr, w), _get(med, "nbdkit-tls", tr, w)) or 0) for w, tr in _cells()])
              for s in SERVERS]
    report.bars(report.plot_path(name, quick), "Throughput relative to nbdkit --tls=require (=1), PSK, RAM",
                labels, series, "ratio to nbdkit TLS")
    summary_ratios = ", ".join(f"{wl_name(w).split()[0]} {tr} " + (f"{r:.2f}x" if r is not None else "no result")
                               for (w, tr), r in ratios.items())
    tls_cost = [_cost(_get(med, "nbdsched-tls", tr, w), _get(med, "nbdsched", tr, w)) for w, tr in _cells()]
    print(report.write(name, "Experiment 11: what TLS costs", sections, facts, commands, peers=True, quick=quick,
                       summary={"setup": "RAM, nbdsched none vs nbdkit memory, plain and TLS (PSK), unix + tcp; "
                                         "4k randread qd64 (libnbd Python), 1 MiB reads qd8 (nbdcopy)",
                                "seed": "-",
                                "ours": f"nbdsched TLS / nbdkit TLS: {summary_ratios}; nbdsched's TLS cost "
                                        + ", ".join(f"{lab} {c}" for lab, c in zip(labels, tls_cost)),
                                "target": ">= 1x nbdkit with TLS",
                                "status": "met" if met == len(ratios) else f"{met} of {len(ratios)} met"},
                       runs={f"{srv} {tr} {wl_name(w)}": [
                           dict(zip(("repetition", "throughput", "server_cpu_us_per_request", "client_cpu_cores"),
                                    (rep + 1, *(None if x is None else round(x, 2) for x in m))))
                           for rep, m in sorted(by_rep.items())] for (srv, tr, w), by_rep in samples.items()}))
    return {"ratios": {f"{wl_name(w)} {tr}": r for (w, tr), r in ratios.items()}, "met": met}
