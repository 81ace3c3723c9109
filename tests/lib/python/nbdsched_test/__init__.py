"""The Python test library: what the control tests, the systemd tests and the
benchmarks share. Import the module you need:

    verdict   skip() (exit 77), check() (raises), Checks (collects)
    tempdir   TempDir: a private, short temporary directory
    process   Server: a child process with its log, ready when it accepts
              connections, stopped with a signal; free_port, wait_for
    daemon    Daemon: nbdsched on a configuration, with its ctl client
    servers   start_nbdsched, nbdkit and qemu-nbd for the benchmarks
    fio       the fio runner (JSON output, summed per job)
    metrics   scrape() the daemon's metrics endpoint, sample() one value of it
    patterns  pattern(): the same deterministic bytes as the C++ tests'

meson puts this folder on PYTHONPATH; scripts outside meson (bench/) add it
to sys.path themselves. Tests run under /usr/bin/python3 (python3-libnbd).
"""
