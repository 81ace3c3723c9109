# lib/host.sh - sourced by the run-vm-*.sh wrappers: the skip rule, the
# host tools every guest needs, and the daemon without debug info.

# SKIP (exit 77) only when qemu cannot run here at all.
qemu_or_skip() {
    if ! command -v qemu-system-x86_64 >/dev/null; then
        echo "SKIP: qemu-system-x86_64 is not installed (scripts/deps installs qemu-system-x86)"
        exit 77
    fi
    if ! qemu-system-x86_64 -accel help 2>/dev/null | grep -qw tcg; then
        echo "SKIP: qemu-system-x86_64 cannot run here (no TCG accelerator)"
        exit 77
    fi
}

# include_tools TOOL...: append --include for each to INCS (fail if missing)
include_tools() {
    local b
    for b in "$@"; do
        command -v "$b" >/dev/null || { echo "FAIL: missing $b (scripts/deps installs it)" >&2; exit 2; }
        INCS+=(--include "$(command -v "$b")")
    done
}

# host_tmpdir: HOST_TMP, one temporary directory for what the wrapper makes
# for the guest (daemon copy, keys); removed at exit.
host_tmpdir() {
    [ -n "${HOST_TMP:-}" ] && return 0
    HOST_TMP=$(mktemp -d /tmp/nbdsched-vm-host.XXXXXX)
    trap 'rm -rf "$HOST_TMP"' EXIT
}

# stripped_daemon PATH: a temporary copy without debug info (a third of the
# size: a smaller initramfs and guest RAM); removed at exit.
stripped_daemon() {
    [ -n "$1" ] && [ -x "$1" ] || { echo "FAIL: --daemon PATH (built nbdsched) is required" >&2; exit 2; }
    host_tmpdir
    STRIPPED=$HOST_TMP/nbdsched
    objcopy --strip-debug "$1" "$STRIPPED" 2>/dev/null || cp "$1" "$STRIPPED"
    chmod 755 "$STRIPPED"
}

# run_and_summarize LOG VMTEST-ARGS...: the console goes to LOG; stdout
# gets every step's verdict, the measured values and the skips (what
# meson's test log keeps), and the console tail on failure.
run_and_summarize() {
    local log=$1 rc; shift
    set +e
    "$HERE/vmtest.sh" -q --log "$log" "$@"
    rc=$?
    set -e
    grep -aE '^VMTEST-(STEP (ok|FAIL)|CHECK|SKIP|KV|SUMMARY)' "$log" || true
    if [ "$rc" != 0 ]; then
        echo "---- console log $log, last 60 lines ----"
        tail -n 60 "$log"
    fi
    echo "console log: $log"
    return "$rc"
}
