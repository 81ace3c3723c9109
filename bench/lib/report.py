"""Machine facts, markdown tables and the report file of one experiment."""

import os
import platform
import subprocess
import time

from nbdsched_test import fio
from nbdsched_test.daemon import nbdsched_binary

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


def _cmd(argv):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (p.stdout or p.stderr).strip().splitlines()[0]
    except Exception as e:   # a missing peer is reported, not fatal
        return f"unavailable ({e.__class__.__name__})"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit():
    return _cmd(["git", "-C", os.path.dirname(RESULTS), "rev-parse", "--short", "HEAD"])


class Facts:
    """Taken at the start of an experiment; load average again at the end."""

    def __init__(self):
        self.started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        self.t0 = time.monotonic()
        self.load_start = loadavg()
        self.load_end = None

    def finish(self):
        self.load_end = loadavg()
        self.duration = time.monotonic() - self.t0

    def markdown(self, peers=False):
        rows = [
            ("date", self.started),
            ("nproc", str(os.cpu_count())),
            ("cpu", cpu_model()),
            ("kernel", platform.release()),
            ("load average (1/5/15 min) at start / end", f"{self.load_start} / {self.load_end}"),
            ("fio", fio.version()),
            # --version names the commit the binary was built from; the
            # checkout's commit is the benchmark scripts' (they may differ).
            ("nbdsched", f"{_cmd([nbdsched_binary(), '--version'])}, "
                         f"binary {os.environ.get('NBDSCHED', 'build/daemon/nbdsched')}"),
            ("bench scripts", f"git {git_commit()}"),
            ("experiment wall time", f"{self.duration:.0f} s"),
        ]
        if peers:
            rows.append(("nbdkit", _cmd(["nbdkit", "--version"])))
            rows.append(("qemu-nbd", _cmd(["qemu-nbd", "--version"])))
        return table(["fact", "value"], rows)


def fio_runs(results):
    """Per-repetition numbers of fio runs for write(runs=...): IOPS, MiB/s,
    mean and stddev latency (us) and I/Os of each run, rounded."""
    keep = ("iops", "bw_mib", "lat_us", "sd_us", "ios")
    return [{k: round(v, 1) for k, v in r.summary().items() if k in keep} for r in results]


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def f0(x):
    return f"{x:,.0f}"


def f1(x):
    return f"{x:,.1f}"


def f2(x):
    return f"{x:.2f}"


def ratio(a, b):
    return f"{a / b:.2f}x" if b else "n/a"


def write(name, title, sections, facts, commands, peers=False, quick=False, summary=None, runs=None,
          commands_note=None):
    """sections: list of (heading or None, markdown text). Writes
    results/<name>.md (or results/quick/<name>.md in --quick mode).
    runs: {cell label: [one dict of numbers per repetition]}, kept in the
    .json beside the summary so that a verdict rule can be judged again on
    the measured repetitions without a rerun. commands_note replaces what
    the Commands section says about the commands listed."""
    facts.finish()
    d = os.path.join(RESULTS, "quick") if quick else RESULTS
    os.makedirs(d, exist_ok=True)
    lines = [f"# {title}", ""]
    if quick:
        lines += ["**--quick smoke run: runtimes too short for the numbers to mean anything.**", ""]
    for heading, text in sections:
        if heading:
            lines += [f"## {heading}", ""]
        lines += [text.rstrip(), ""]
    lines += ["## Machine", "", facts.markdown(peers), ""]
    note = commands_note or ("The daemon configurations are written as JSON (a subset of YAML) next to the fio "
                             "commands; `SOCK` stands for the Unix socket in the run's scratch directory.")
    lines += ["## Commands", "", "Reproduce with `NBDSCHED=build-bench/daemon/nbdsched bench/run-all --only "
              f"{name}`. {note}", ""]
    lines += ["```sh"] + commands + ["```", ""]
    path = os.path.join(d, f"{name}.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    if summary is not None:   # one row of results/README.md (bench/lib/summary.py)
        import json
        with open(os.path.join(d, f"{name}.json"), "w") as f:
            extra = {"runs": runs} if runs is not None else {}
            json.dump(dict(summary, name=name, title=title, load=f"{facts.load_start} / {facts.load_end}", **extra),
                      f, indent=1)
    return path


def plot_path(name, quick=False):
    d = os.path.join(RESULTS, "quick") if quick else RESULTS
    os.makedirs(d, exist_ok=True)
    return os.path.join(d, f"{name}.png")


def bars(path, title, labels, series, ylabel, seed=None):
    """Grouped bar chart: series = [(legend, [values per label])]."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(series)
    width = 0.8 / max(n, 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(labels) + 2), 4))
    for i, (legend, values) in enumerate(series):
        xs = [x + (i - (n - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width, label=legend)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=20 if len(labels) > 4 else 0, ha="right" if len(labels) > 4 else "center")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if n > 1:
        ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
