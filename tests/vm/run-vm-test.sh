#!/usr/bin/env bash
# run-vm-test.sh - the nbdsched VM test: boot Debian's 6.12 kernel under qemu
# with the daemon, nbd-client, fio, e2fsprogs and blkdiscard in an initramfs,
# and run guest/e2e.sh (points p1-p9) against a real /dev/nbd0.
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

# shellcheck source=lib/host.sh
. "$HERE/lib/host.sh"
qemu_or_skip
INCS=()
include_tools nbd-client fio mke2fs mkfs.ext4 e2fsck blkdiscard ss
if [ "$SERVER" = nbdkit ]; then
    include_tools nbdkit
    pdir=$(nbdkit --dump-config | sed -n 's/^plugindir=//p')
    INCS+=(--include "$pdir/nbdkit-memory-plugin.so")
else
    stripped_daemon "$DAEMON"
    INCS+=(--include-as "$STRIPPED:/usr/local/bin/nbdsched")
    ENVS+=(--env "VM_DAEMON=/usr/local/bin/nbdsched")
fi
ENVS+=(--env "VM_SERVER=$SERVER")
# Point 9's keys (TLS); without certtool the guest reports p9 as skipped.
# shellcheck source=lib/tls-keys.sh
. "$HERE/lib/tls-keys.sh"
host_tmpdir
if make_tls_keys "$HOST_TMP/tls"; then
    INCS+=(--include-as "$HOST_TMP/tls:/vmtest/tls")
else
    echo "note: no TLS keys for point 9 (certtool from gnutls-bin is missing)"
fi
[ -n "$LOG" ] || LOG=$(mktemp /tmp/nbdsched-vm.XXXXXX.log)

rc=0
run_and_summarize "$LOG" --guest-script "$HERE/guest/e2e.sh" \
    --include-as "$HERE/guest:/vmtest/parts" \
    --module nbd --module ext4 --module crc32c_generic --module bfq \
    --module tcp_diag --module inet_diag \
    --timeout "$TIMEOUT" "${INCS[@]}" "${ENVS[@]}" "${EXTRA[@]+"${EXTRA[@]}"}" || rc=$?
exit "$rc"
