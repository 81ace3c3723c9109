"""nbdsched-sched-bench (tools/sched_bench), the schedulers' own CPU cost
per request without sockets: found next to the daemon the benchmarks use,
run, and its table read."""

import os
import statistics
import subprocess


def tool_path():
    """The tool in the daemon's build tree (NBDSCHED), or None if not built."""
    daemon = os.environ.get("NBDSCHED", "build/daemon/nbdsched")
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(daemon))), "tools", "sched_bench",
                        "nbdsched-sched-bench")
    return tool if os.access(tool, os.X_OK) else None


def ns_per_request(args, runs):
    """{policy: median ns per request over `runs` runs of the tool with
    `args`, one queue count}; None if the tool is not built. The runs
    alternate the policies, so a noisy second hits all of them alike."""
    tool = tool_path()
    if tool is None:
        return None
    seen = {}
    for _ in range(runs):
        out = subprocess.run([tool] + args, check=True, capture_output=True, text=True, timeout=300).stdout
        for line in out.splitlines()[1:]:   # policy queues ns/request requests timer-changes
            f = line.split()
            if len(f) >= 3 and f[2].replace(".", "").isdigit():
                seen.setdefault(f[0], []).append(float(f[2]))
    return {p: statistics.median(v) for p, v in seen.items()}
