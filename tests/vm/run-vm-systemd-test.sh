#!/usr/bin/env bash
# run-vm-systemd-test.sh - the systemd units for real: boot the 6.12 guest
# with systemd as PID 1 and the units meson configured, and run
# guest/systemd-units.sh (socket activation, Type=notify, the attach
# template, reload, stop) as vmtest.service.
#
#   run-vm-systemd-test.sh --daemon BUILD/daemon/nbdsched --units BUILD/systemd
#                          --socket-unit SRC/systemd/nbdsched.socket
#                          --example-config SRC/config/nbdsched.example.yaml [--log FILE]
# Exit as run-vm-test.sh (77 = SKIP only when qemu cannot run here).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DAEMON= UNITS= SOCKET_UNIT= EXAMPLE_CONFIG= LOG= TIMEOUT=600
while [ $# -gt 0 ]; do
    case $1 in
    --daemon) DAEMON=$(realpath "$2"); shift 2;;
    --units) UNITS=$2; shift 2;;
    --socket-unit) SOCKET_UNIT=$2; shift 2;;
    --example-config) EXAMPLE_CONFIG=$2; shift 2;;
    --log) LOG=$2; shift 2;;
    --timeout) TIMEOUT=$2; shift 2;;
    *) echo "unknown option $1" >&2; exit 2;;
    esac
done
[ -n "$EXAMPLE_CONFIG" ] || { echo "--example-config is required" >&2; exit 2; }
# shellcheck source=lib/host.sh
. "$HERE/lib/host.sh"
qemu_or_skip
[ -x /lib/systemd/systemd ] || { echo "SKIP: no systemd on the host to put in the guest"; exit 77; }
INCS=()
include_tools nbd-client
stripped_daemon "$DAEMON"
svc=$UNITS/nbdsched.service
bin=$(sed -n 's/^ExecStart=\([^ ]*\) .*/\1/p' "$svc")
conf=$(sed -n 's/^ExecStart=.* --config \([^ ]*\).*/\1/p' "$svc")
u=/lib/systemd/system
INCS+=(--include-as "$STRIPPED:$bin"
       --include-as "$svc:$u/nbdsched.service"
       --include-as "$UNITS/nbdsched-nbd@.service:$u/nbdsched-nbd@.service"
       --include-as "$SOCKET_UNIT:$u/nbdsched.socket"
       --include-as "$EXAMPLE_CONFIG:/vmtest/nbdsched.example.yaml")
[ -n "$LOG" ] || LOG=$(mktemp /tmp/nbdsched-vm-systemd.XXXXXX.log)
rc=0
run_and_summarize "$LOG" --systemd --guest-script "$HERE/guest/systemd-units.sh" \
    --module nbd --timeout "$TIMEOUT" --env "VM_CONFIG=$conf" "${INCS[@]}" || rc=$?
exit "$rc"
