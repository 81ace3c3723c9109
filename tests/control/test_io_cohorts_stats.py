"""ctl stats' io_cohorts and the metrics beside it: a file device on
io_uring with direct: true and io_cohorts: auto shows what its engine does
with cohorts; with io_cohorts: off, without O_DIRECT, and a RAM device have
no such field. Before any request the engine has seen no pass and tried
nothing; after reads the JSON, the table's device line and the metrics say
the same. (Whether this host's disk runs passes, and what a trial decides,
is the pure rule's to test: tests/unit/backend/test_cohort_trials.cpp.)"""
import nbd

from nbdsched_test.daemon import Daemon
from nbdsched_test.metrics import sample, scrape
from nbdsched_test.process import free_port, wait_for
from nbdsched_test.verdict import check, skip

CONFIG = """
metrics: 127.0.0.1:{port}
devices:
  - {{name: auto, backend: file, path: "{{dir}}/a.img", size: 16MiB, direct: true, io_engine: auto, read_ahead_kb: 0}}
  - {{name: off, backend: file, path: "{{dir}}/o.img", size: 16MiB, direct: true, io_engine: auto, io_cohorts: off}}
  - {{name: cached, backend: file, path: "{{dir}}/c.img", size: 16MiB, io_engine: auto}}
  - {{name: ram, backend: ram, size: 16MiB}}
exports:
  - {{name: a, device: auto}}
"""


def main():
    port = free_port()
    with Daemon(CONFIG.format(port=port), "io-cohorts-stats") as d:
        stats = d.stats()
        if "io_cohorts" not in Daemon.device(stats, "auto"):
            if "io_uring unavailable" in d.log():
                skip("the kernel refused an io_uring ring: the file devices run on the I/O threads")
            check(False, f"device auto on io_uring has io_cohorts: {Daemon.device(stats, 'auto')}")
        for name in ("off", "cached", "ram"):
            check("io_cohorts" not in Daemon.device(stats, name), f"device {name} has no io_cohorts")
        fresh = Daemon.device(stats, "auto")["io_cohorts"]
        check(fresh == {"passes": False, "on": False, "trials": 0, "held_off": 0},
              f"before any request: no passes seen, nothing tried: {fresh}")

        h = nbd.NBD()
        h.connect_uri(d.uri("a"))
        bufs = [nbd.Buffer(4096) for _ in range(8)]
        for i in range(256):   # 4 KiB reads over the 16 MiB, 8 at a time
            cookies = [h.aio_pread(bufs[k], ((i * 8 + k) * 4096 * 7) % (16 << 20)) for k in range(8)]
            for c in cookies:
                while not h.aio_command_completed(c):
                    h.poll(-1)
        h.shutdown()

        seen = {}

        def agree():
            seen["ctl"] = Daemon.device(d.stats(), "auto")["io_cohorts"]
            text = scrape(port)
            seen["metrics"] = {k: sample(text, f"nbdsched_device_{k}", 'device="auto"') for k in
                               ("io_cohorts_on", "io_cohort_trials_total", "io_cohort_trials_held_off_total")}
            c = seen["ctl"]
            return seen["metrics"] == {"io_cohorts_on": float(c["on"]), "io_cohort_trials_total": float(c["trials"]),
                                       "io_cohort_trials_held_off_total": float(c["held_off"])}
        check(wait_for(agree, 10, step=0.2), f"ctl stats and the metrics agree: {seen}")
        c = seen["ctl"]
        check(c["held_off"] <= c["trials"] and (not c["on"] or c["passes"]),
              f"held off by at most every trial, on only where the disk runs passes: {c}")
        text = scrape(port)
        check(sample(text, "nbdsched_device_io_cohorts_on", 'device="off"') is None,
              "no cohort metrics for io_cohorts: off")
        line = next((l for l in d.ctl("stats").splitlines() if l.startswith("device auto ")), "")
        want = ("cohorts on" if c["on"] else "cohorts held off" if c["passes"] else "cohorts off, no passes lately")
        trials = f"{c['trials']} trial" + ("" if c["trials"] == 1 else "s")
        check(f", {want} ({trials}, {c['held_off']} held them off)" in line,
              f"ctl stats' table says it on the device line: {line!r}")


if __name__ == "__main__":
    main()
