# p12-attach-safety.sh - point 12: what `nbdsched attach --device` and
# `nbdsched detach` refuse to do to a device in use. A monitor started on a
# device that is attached to another export (or by something else) exits 1
# and leaves the device, its size and its data alone; one started on the same
# export takes it over, unless another monitor still watches it (then it
# exits 1, or with --wait-for-monitor waits for that one to end). `detach`
# refuses a mounted device (unless --force) and one that is not attached.
P12_DEV=/dev/nbd1
P12_MONITOR=

# p12_monitor EXPORT LOG: `nbdsched attach` as the monitor of $P12_DEV in the
# background (P12_MONITOR), its stderr in LOG
p12_monitor() {
    "$VM_DAEMON" attach --socket "$SOCK" --export "$1" --device "$P12_DEV" >/dev/null 2>"$2" &
    P12_MONITOR=$!
}
p12_monitor_gone() { ! pid_running "$P12_MONITOR"; }
p12_marker() { dd if="$P12_DEV" bs=8 count=1 iflag=direct 2>/dev/null; }

# Export rot (16 MiB) on the device, a marker written, the monitor killed as a
# crash would.
p12_attach_rot() {
    p12_monitor rot /tmp/p12-a.log
    vt_wait_for 10 dev_attached "$P12_DEV" || { cat /tmp/p12-a.log; return 1; }
    printf 'P12MARK!' | dd of="$P12_DEV" bs=4096 conv=sync,fsync oflag=direct 2>/dev/null
    [ "$(p12_marker)" = 'P12MARK!' ] || { echo "marker not written"; return 1; }
    kill -KILL "$P12_MONITOR"
    wait "$P12_MONITOR" 2>/dev/null
    return 0
}

# p12_refused EXPORT TEXT: a monitor for EXPORT exits 1 saying TEXT; the
# device keeps its size and its data.
p12_refused() {
    _sectors=$(dev_size "$P12_DEV")
    p12_monitor "$1" /tmp/p12-refused.log
    vt_wait_for 10 p12_monitor_gone || { echo "the monitor for $1 is still running"; kill -KILL "$P12_MONITOR"; }
    wait "$P12_MONITOR"
    _rc=$?
    cat /tmp/p12-refused.log
    [ "$_rc" = 1 ] || { echo "exit $_rc"; return 1; }
    grep -q "$2" /tmp/p12-refused.log || { echo "no '$2'"; return 1; }
    usleep 500000
    [ "$(dev_size "$P12_DEV")" = "$_sectors" ] || { echo "size $(dev_size "$P12_DEV"), was $_sectors"; return 1; }
    [ "$(p12_marker)" = 'P12MARK!' ] || { echo "the marker is gone"; return 1; }
}

# The same export: taken over, and the device serves it as before.
p12_adopt_same() {
    p12_monitor rot /tmp/p12-b.log
    vt_wait_for 10 grep -q 'monitoring it' /tmp/p12-b.log || { cat /tmp/p12-b.log; return 1; }
    pid_running "$P12_MONITOR" || { cat /tmp/p12-b.log; return 1; }
    [ "$(p12_marker)" = 'P12MARK!' ] || { echo "the marker is gone"; return 1; }
}

# The taken-over device's connection is alive: the monitor's first
# NBD_CMD_RECONFIGURE has nothing to replace (the kernel answers success
# anyway and closes the socket), and the log must not claim a reconnect.
p12_no_false_reconnect() {
    vt_wait_for 10 grep -qE 'nothing to replace|reconnected to' /tmp/p12-b.log
    cat /tmp/p12-b.log
    ! grep -q 'reconnected to' /tmp/p12-b.log && grep -q 'nothing to replace' /tmp/p12-b.log
}

# A second monitor of the same device and export, beside the running one (a
# manual `attach --device` next to the unit's): exit 1 naming the first;
# the first keeps running.
p12_second_monitor_refused() {
    _first=$P12_MONITOR
    p12_refused rot "is watched by another monitor (pid $_first)"
    _rc=$?
    P12_MONITOR=$_first
    pid_running "$_first" || { echo "the first monitor is gone"; return 1; }
    return $_rc
}

# The same, asked to wait (--wait-for-monitor, the systemd unit's way): it
# says who watches the device and keeps waiting; when that monitor ends (here
# killed) it takes the device over, and the lock names it.
p12_waiting_monitor_takes_over() {
    _first=$P12_MONITOR
    "$VM_DAEMON" attach --socket "$SOCK" --export rot --device "$P12_DEV" --wait-for-monitor >/dev/null 2>/tmp/p12-w.log &
    _waiter=$!
    vt_wait_for 10 grep -q "watched by another monitor (pid $_first).*waiting for it to end" /tmp/p12-w.log ||
        { cat /tmp/p12-w.log; kill "$_waiter"; return 1; }
    usleep 500000
    pid_running "$_waiter" || { echo "the waiting monitor exited"; cat /tmp/p12-w.log; return 1; }
    kill -KILL "$_first"
    wait "$_first" 2>/dev/null
    P12_MONITOR=$_waiter
    vt_wait_for 10 grep -q 'monitoring it' /tmp/p12-w.log || { cat /tmp/p12-w.log; return 1; }
    cat /tmp/p12-w.log
    pid_running "$_waiter" || { echo "the new monitor exited"; return 1; }
    [ "$(cat /run/nbdsched-attach/nbd1.lock)" = "$_waiter" ] || { echo "lock: $(cat /run/nbdsched-attach/nbd1.lock)"; return 1; }
    [ "$(p12_marker)" = 'P12MARK!' ] || { echo "the marker is gone"; return 1; }
}

# A device attached before records existed (an upgrade restarting its
# monitor): with its record gone, a monitor for an export of another size
# is refused, one whose export has the device's size takes it over and
# writes the record again.
p12_drop_record() {
    kill -KILL "$P12_MONITOR"
    wait "$P12_MONITOR" 2>/dev/null
    rm -f /run/nbdsched-attach/nbd1
}
p12_no_record_adopted() {
    p12_monitor rot /tmp/p12-c.log
    vt_wait_for 10 grep -q 'monitoring it' /tmp/p12-c.log || { cat /tmp/p12-c.log; return 1; }
    cat /tmp/p12-c.log
    pid_running "$P12_MONITOR" && grep -q 'taking it over and recording it' /tmp/p12-c.log &&
        test -s /run/nbdsched-attach/nbd1 && [ "$(p12_marker)" = 'P12MARK!' ]
}

# p12_detach RC TEXT DEVICE [OPTIONS]: `nbdsched detach` exits RC, saying TEXT
p12_detach() {
    _want=$1 _text=$2; shift 2
    timeout 20 "$VM_DAEMON" detach "$@" >/tmp/p12-detach.out 2>&1
    _rc=$?
    cat /tmp/p12-detach.out
    [ "$_rc" = "$_want" ] || { echo "exit $_rc"; return 1; }
    [ -z "$_text" ] || grep -q "$_text" /tmp/p12-detach.out || { echo "no '$_text'"; return 1; }
}

P12_BUSY=/dev/nbd2
# A device that was never attached: exit 1, not a silent success.
p12_detach_not_attached() {
    p12_detach 1 "/dev/nbd2 is not attached" "$P12_BUSY"
}

# ext4 mounted on /dev/nbd2 (export nonrot) with its own monitor.
p12_busy_attach() {
    "$VM_DAEMON" attach --socket "$SOCK" --export nonrot --device "$P12_BUSY" >/dev/null 2>/tmp/p12-busy.log &
    P12_BUSY_MONITOR=$!
    vt_wait_for 10 dev_attached "$P12_BUSY" || { cat /tmp/p12-busy.log; return 1; }
    mkdir -p /mnt/p12 && mkfs.ext4 -q -F "$P12_BUSY" && mount -t ext4 "$P12_BUSY" /mnt/p12
}
# Refused while mounted; the filesystem keeps working.
p12_detach_mounted_refused() {
    p12_detach 1 "in use (mounted on /mnt/p12)" "$P12_BUSY" || return 1
    dev_attached "$P12_BUSY" || { echo "detached anyway"; return 1; }
    echo still > /mnt/p12/after && sync && [ "$(cat /mnt/p12/after)" = still ]
}
# --force detaches it (mounted read-only here, so nothing is lost); once
# unmounted the kernel drops the device and its monitor exits 0.
p12_busy_monitor_gone() { ! pid_running "$P12_BUSY_MONITOR"; }
p12_detach_force() {
    mount -o remount,ro /mnt/p12 || return 1
    p12_detach 0 "" --force "$P12_BUSY" || return 1
    umount /mnt/p12
    vt_wait_for 10 dev_detached "$P12_BUSY" || { echo "still attached"; return 1; }
    vt_wait_for 10 p12_busy_monitor_gone || { echo "the monitor did not exit"; return 1; }
    wait "$P12_BUSY_MONITOR" || return 1
    p12_detach 1 "/dev/nbd2 is not attached" "$P12_BUSY"
}
# NBD_CMD_STATUS gives no answer on 6.12, and sysfs answers instead: nothing
# for the admin to look at, so no warning in a monitor's log.
p12_no_status_warning() {
    cat /tmp/p12-busy.log
    ! grep -q 'warning.*NBD_CMD_STATUS' /tmp/p12-busy.log
}

p12_cleanup() {
    umount /mnt/p12 2>/dev/null
    for _d in "$P12_DEV" "$P12_BUSY"; do
        dev_attached "$_d" && { timeout 20 "$VM_DAEMON" detach --force "$_d" || timeout 20 "$VM_DAEMON" detach "$_d"; }
    done
    [ -n "$P12_MONITOR" ] && pid_running "$P12_MONITOR" && kill "$P12_MONITOR"
    [ -n "$P12_BUSY_MONITOR" ] && pid_running "$P12_BUSY_MONITOR" && kill "$P12_BUSY_MONITOR"
    return 0
}

p12_attach_safety() {
    if [ "${VM_SERVER:-nbdsched}" != nbdsched ]; then vt_skip p12 "nbdsched attach needs the nbdsched daemon"; return 0; fi
    p12_points
    p12_cleanup
}

p12_points() {
    vt_step p12-attach-rot p12_attach_rot || return 1
    # hdd is 64 MiB: the old monitor grew the device to it and switched it over
    vt_step p12-other-export-refused p12_refused hdd "its export is 'rot', not 'hdd'"
    # nonrot is 16 MiB too: only the record tells it apart
    vt_step p12-same-size-export-refused p12_refused nonrot "its export is 'rot', not 'nonrot'"
    vt_step p12-same-export-adopted p12_adopt_same
    vt_step p12-adopt-no-false-reconnect p12_no_false_reconnect
    vt_step p12-second-monitor-refused p12_second_monitor_refused
    vt_step p12-waiting-monitor-takes-over p12_waiting_monitor_takes_over
    vt_step p12-drop-record p12_drop_record
    vt_step p12-no-record-other-size-refused p12_refused hdd "bytes where the device has"
    vt_step p12-no-record-same-size-adopted p12_no_record_adopted
    vt_step p12-detach-not-attached p12_detach_not_attached
    vt_step p12-busy-attach p12_busy_attach || return 1
    vt_step p12-detach-mounted-refused p12_detach_mounted_refused
    vt_step p12-detach-force p12_detach_force
    vt_step p12-no-status-warning p12_no_status_warning
}
