#!/usr/bin/env bash
# run-vm-test.sh - the nbdsched VM test: boot Debian's 6.12 kernel under qemu
# with the daemon, nbd-client, fio, e2fsprogs and blkdiscard in an initramfs,
# and run guest/e2e.sh (points 1-8 of issue 6) against a real /dev/nbd0.
#
#   run-vm-test.sh --daemon BUILD/daemon/nbdsched [--log FILE] [--timeout SEC]
#   run-vm-test.sh --nbdkit            (harness check: nbdkit memory 1G)
#   ... [--env KEY=VALUE] [-- vmtest.sh options]
#
# Exit: 0 pass, 1 a step failed, 124 timeout, 125 crash, 77 = SKIP (only when
# qemu cannot run at all here).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

DAEMON=
SERVER=nbdsched
TIMEOUT=600
LOG=
EXTRA=()
ENVS=()
while [ $# -gt 0 ]; do
    case $1 in
    --daemon) DAEMON=$(realpath "$2"); shift 2;;
    --nbdkit) SERVER=nbdkit; shift;;
    --log) LOG=$2; shift 2;;
    --timeout) TIMEOUT=$2; shift 2;;
    --env) ENVS+=(--env "$2"); shift 2;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    --) shift; EXTRA+=("$@"); break;;
    *) echo "unknown option $1" >&2; exit 2;;
    esac
done

if ! command -v qemu-system-x86_64 >/dev/null; then
    echo "SKIP: qemu-system-x86_64 is not installed (scripts/deps installs qemu-system-x86)"
    exit 77
fi
if ! qemu-system-x86_64 -accel help 2>/dev/null | grep -qw tcg; then
    echo "SKIP: qemu-system-x86_64 cannot run here (no TCG accelerator)"
    exit 77
fi

need() { command -v "$1" >/dev/null || { echo "FAIL: missing $1 (scripts/deps installs it)" >&2; exit 2; }; }
INCS=()
for b in nbd-client fio mke2fs mkfs.ext4 e2fsck blkdiscard ss; do
    need "$b"; INCS+=(--include "$(command -v "$b")")
done
if [ "$SERVER" = nbdkit ]; then
    need nbdkit
    pdir=$(nbdkit --dump-config | sed -n 's/^plugindir=//p')
    INCS+=(--include "$(command -v nbdkit)" --include "$pdir/nbdkit-memory-plugin.so")
else
    [ -n "$DAEMON" ] && [ -x "$DAEMON" ] || { echo "FAIL: --daemon PATH (built nbdsched) is required" >&2; exit 2; }
    # Without debug info: a third of the size, so a smaller initramfs and
    # guest RAM (the copy is what the guest runs, as /usr/local/bin/nbdsched).
    STRIPPED=$(mktemp /tmp/nbdsched-vm-daemon.XXXXXX)
    trap 'rm -f "$STRIPPED"' EXIT
    objcopy --strip-debug "$DAEMON" "$STRIPPED" 2>/dev/null || cp "$DAEMON" "$STRIPPED"
    chmod 755 "$STRIPPED"
    INCS+=(--include-as "$STRIPPED:/usr/local/bin/nbdsched")
    ENVS+=(--env "VM_DAEMON=/usr/local/bin/nbdsched")
fi
ENVS+=(--env "VM_SERVER=$SERVER")
[ -n "$LOG" ] || LOG=$(mktemp /tmp/nbdsched-vm.XXXXXX.log)

# The console goes to the log; stdout gets the verdict of every step, the
# measured values and the skips (what meson's test log keeps).
set +e
"$HERE/vmtest.sh" -q --log "$LOG" --guest-script "$HERE/guest/e2e.sh" \
    --include-as "$HERE/guest:/vmtest/parts" \
    --module nbd --module ext4 --module crc32c_generic --module bfq \
    --module tcp_diag --module inet_diag \
    --timeout "$TIMEOUT" "${INCS[@]}" "${ENVS[@]}" "${EXTRA[@]+"${EXTRA[@]}"}"
rc=$?
set -e
grep -aE '^VMTEST-(STEP (ok|FAIL)|CHECK|SKIP|KV|SUMMARY)' "$LOG" || true
if [ "$rc" != 0 ]; then
    echo "---- console log $LOG, last 60 lines ----"
    tail -n 60 "$LOG"
fi
echo "console log: $LOG"
exit "$rc"
