"""Experiment 4, seed 004 (read-ahead on a disk): `hdd` profile, 8 readers,
each reading sequentially (iodepth 1, like buffered reads) in its own large
region (region i starts at i x 128 GiB of the 1 TiB device, so the heads
travel between them as between files spread over a disk), with 128 KiB and
1 MiB requests: read_ahead_kb 128 vs auto (auto = 2 x max_io = 2560 KiB on
this rotational device without an optimal I/O size). Scheduler `none`
(no idling, like mq-deadline, the kernel's default for such disks)."""

import glob
import os
import subprocess
import sys

# bench/lib, and the test library (tests/lib/python) for servers, fio, TempDir
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), p) for p in ("lib", "../tests/lib/python")]
import common  # noqa: E402
import report  # noqa: E402
from nbdsched_test import fio, servers  # noqa: E402
from nbdsched_test.tempdir import TempDir  # noqa: E402

NAME = "exp4-seed004-readahead-hdd"
SEED = {("128k", "128"): 57, ("128k", "auto"): 165, ("1m", "128"): 122, ("1m", "auto"): 167}
RA = ["128", "auto"]
BS = ["128k", "1m"]
REGION = 128 << 30


def readahead_in_daemon_sources():
    """(committed, working tree): whether the daemon's sources drive
    readahead/ at HEAD and in the checkout. A fact for the report;
    the verdict rests on the measurement of the binary."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    working = False
    for p in glob.glob(os.path.join(root, "daemon", "**", "*.[ch]pp"), recursive=True):
        with open(p, errors="replace") as f:
            working = working or "readahead" in f.read().lower()
    r = subprocess.run(["git", "-C", root, "grep", "-qi", "readahead", "HEAD", "--", "daemon"],
                       capture_output=True)
    return r.returncode == 0, working


def main():
    a = common.args(__doc__)
    runtime, ramp = (0.5, 0.2) if a.quick else (10, 1)
    facts = report.Facts()
    devices = [common.ram_device(f"hdd-{r}", "1TiB", "none", None, "hdd", read_ahead_kb=int(r) if r != "auto" else r)
               for r in RA]
    exports = [{"name": f"e-{r}", "device": f"hdd-{r}"} for r in RA]
    res = {}
    with TempDir("e4") as tmp, servers.start_nbdsched(tmp, "d", devices, exports) as srv:
        for bs in BS:
            for r in RA:   # interleaved per block size
                g = common.fio_base(runtime, ramp)
                g.update({"uri": srv.uri(f"e-{r}"), "rw": "read", "bs": bs, "iodepth": 1})
                jobs = [(f"r{i}", {"offset": i * REGION, "size": "64GiB"}) for i in range(8)]
                res[(bs, r)] = fio.run(g, jobs, [srv])
        commands = common.commands_for(srv, list(res.values()))
    s = {k: v.summary(rw="read") for k, v in res.items()}
    mb = {k: v["bw_mib"] * 1.048576 for k, v in s.items()}   # MB/s, the seed's unit
    rows = [(bs, f"`{r}`", report.f1(mb[(bs, r)]), report.f0(s[(bs, r)]["lat_us"]), SEED[(bs, r)])
            for bs in BS for r in RA]
    gains = {bs: mb[(bs, "auto")] / mb[(bs, "128")] if mb[(bs, "128")] else 0 for bs in BS}
    seed_gains = {bs: SEED[(bs, "auto")] / SEED[(bs, "128")] for bs in BS}
    committed, working = readahead_in_daemon_sources()
    effective = any(g > 1.1 for g in gains.values())
    text = report.table(["request size", "read_ahead_kb", "MB/s (8 readers)", "avg lat (us)", "seed MB/s"], rows)
    text += "\n\n" + report.table(["request size", "auto / 128 (ours)", "seed"],
                                  [(bs, f"{gains[bs]:.2f}x", f"{seed_gains[bs]:.2f}x") for bs in BS])
    text += f"\n\nOne run of {runtime} s (after {ramp} s ramp) per cell, the two settings interleaved."
    if not effective:
        verdict = ("**Not effective in the binary measured: read-ahead is not wired into the daemon yet** "
                   "(`read_ahead_kb` is validated but *planned*, docs/configuration.md). Daemon sources at HEAD "
                   f"({report.git_commit()}) {'do' if committed else 'do not'} drive readahead/"
                   f"{'; the working tree does (wiring in progress, not in this binary)' if working and not committed else ''}. "
                   "Both settings measure the same disk, so the table shows the no-read-ahead baseline twice. "
                   "Re-run `bench/run-all --only exp4` on a daemon built with the wiring; target not assessable.")
        met = None
    else:
        # Within 2x either way: a gain far above the seed's is as far from it as one far below.
        met = all(g > 1 and sg / 2 <= g <= sg * 2 for g, sg in zip(gains.values(), seed_gains.values()))
        verdict = ("Target (same direction, gain between half and twice the seed's): "
                   f"**{'met' if met else 'missed'}** (128 KiB: {gains['128k']:.2f}x vs {seed_gains['128k']:.2f}x; "
                   f"1 MiB: {gains['1m']:.2f}x vs {seed_gains['1m']:.2f}x).")
    verdict += (" Baseline (`read_ahead_kb: 128`): every 128 KiB window of 8 interleaved streams pays a seek "
                "plus half a rotation (~9-10 ms between regions 128 GiB apart), so the disk delivers "
                f"{mb[('128k', '128')]:.1f} MB/s at 128 KiB here, below the seed's 57 MB/s (the seed's XFS files "
                "sat closer together). "
                "At 1 MiB each read pays one seek for 1 MiB; the kernel instead grows its read-ahead to the "
                "request size (up to max_sectors) and reads ahead asynchronously, hence the seed's 122 MB/s. "
                "With `auto` each seek buys a 2560 KiB window (two 1280 KiB prefetches served back to back); "
                "a 1 MiB read covered by cached data and prefetches in flight waits for them, and a partly "
                "covered one reads only its missing span (readahead/readahead.hpp). The shutdown "
                "summary of the daemon counts read-ahead hits, waits, misses and fills.")
    sections = [(None, __doc__.strip()), ("Result", text), ("Verdict", verdict),
                ("Profile", common.profile_section("hdd") + "\n\nDevice: 1 TiB sparse RAM (matches `capacity`, "
                 "so seek distances are the profile's); `read_ahead_cache` default 64 MiB.")]
    labels = [f"{bs} ra={r}" for bs in BS for r in RA]
    report.bars(report.plot_path(NAME, a.quick), "Seed 004: hdd, 8 sequential readers, read-ahead 128 KiB vs auto",
                labels, [("nbdsched", [mb[(bs, r)] for bs in BS for r in RA]),
                         ("seed SATA HDD", [SEED[(bs, r)] for bs in BS for r in RA])], "MB/s")
    print(report.write(NAME, "Experiment 4: seed 004, read-ahead on a disk", sections, facts, commands,
                       quick=a.quick, summary={
                           "setup": "hdd profile, none, 8 seq readers, 128k and 1m: read_ahead_kb 128 vs auto",
                           "seed": "128k: 57 -> 165 MB/s; 1m: 122 -> 167 MB/s",
                           "ours": f"128k: {mb[('128k', '128')]:.1f} -> {mb[('128k', 'auto')]:.1f} MB/s; "
                                   f"1m: {mb[('1m', '128')]:.1f} -> {mb[('1m', 'auto')]:.1f} MB/s",
                           "target": "same direction, between half and twice the seed ratio",
                           "status": "blocked: read-ahead not wired into the daemon" if met is None
                                     else "met" if met else "missed"}))
    return {"mb": mb, "gains": gains, "effective": effective, "met": met}


if __name__ == "__main__":
    main()
