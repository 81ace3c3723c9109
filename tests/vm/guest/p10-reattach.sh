# p10-reattach.sh - point 10: `nbdsched attach` keeps /dev/nbd3 (ext4 on a
# file-backed export, mounted, fio --verify running) alive through SIGKILLs
# of the daemon at random moments and planned restarts (SIGTERM + start):
# no I/O error reaches fio or the filesystem, every file written with fsync
# right before a kill reads back, e2fsck is clean afterwards.
P10_DEV=/dev/nbd3
P10_MNT=/mnt/p10
P10_ROUNDS=${VM_P10_ROUNDS:-10}
# Stop + start with a reconnect: fewer rounds, since a planned restart is
# point 11's hand-over now.
P10_RESTART_ROUNDS=${VM_P10_RESTART_ROUNDS:-3}
# --timeout: a request in flight when the daemon died is requeued onto the
# new connection only when it times out (nbd_xmit_timeout), so this bounds
# the stall; a spurious expiry under TCG costs a reconnect, not an error.
P10_TIMEOUT=${VM_P10_TIMEOUT:-1}
P10_MONITOR=

# The daemon restarts 20 times here: it runs on a configuration with only
# this point's device (the main one, with its 1 GiB RAM devices and TLS
# listener, takes seconds to start under TCG); the main one comes back after.
P10_CONF=/tmp/p10.yaml
p10_write_config() {
    cat > "$P10_CONF" <<EOC
listen:
  - unix: $SOCK
  - tcp: 127.0.0.1:$PORT
control: $CTL_SOCK
devices:
  - {name: filedisk, backend: file, path: /tmp/p10.img, size: 64MiB}
exports:
  - {name: reattach, device: filedisk}
EOC
}
# p10_use_config TAG: restart the daemon on $CONF
p10_use_config() {
    server_signal TERM 15
    server_start "$1"
}

p10_attach() {
    "$VM_DAEMON" attach --socket "$SOCK" --export reattach --device "$P10_DEV" \
        --timeout "${P10_TIMEOUT}s" --dead-conn-timeout 60s >/tmp/p10-attach.out 2>/tmp/p10-monitor.log &
    P10_MONITOR=$!
    vt_wait_for 10 dev_attached "$P10_DEV" && vt_wait_for 5 grep -qx "$P10_DEV" /tmp/p10-attach.out ||
        { cat /tmp/p10-monitor.log; return 1; }
}

# The longest completion latency (ms) of any I/O in a fio JSON report.
p10_max_lat_ms() {
    awk '/"lat_ns"/ {f = 1; next}
         f && /"max"/ {gsub(/[^0-9.]/, "", $3); if ($3 + 0 > m) m = $3 + 0; f = 0}
         END {printf "%d", m / 1e6}' "$1"
}

# p10_fio_loop TAG [DIR]: short fio runs with verify in DIR ($P10_MNT) until
# /tmp/p10.stop exists; one "rc MAX_LAT_MS" line per run in /tmp/p10-TAG.res.
p10_fio_loop() {
    _dir=${2:-$P10_MNT}
    _i=0
    : > "/tmp/p10-$1.res"
    while [ ! -e /tmp/p10.stop ]; do
        fio --name=p10 --filename="$_dir/fio$((_i % 2))" --ioengine=libaio --direct=1 --rw=randwrite \
            --bs=4k --iodepth=16 --size=4M --verify=crc32c --do_verify=1 --eta=never \
            --output-format=json --output="/tmp/p10-$1.json" >/dev/null 2>&1
        _rc=$?
        echo "$_rc $(p10_max_lat_ms "/tmp/p10-$1.json")" >> "/tmp/p10-$1.res"
        [ $_rc = 0 ] || cp "/tmp/p10-$1.json" "/tmp/p10-$1-failed-$_i.json"
        _i=$((_i + 1))
    done
}

p10_reconnects() { grep -c 'reconnected to' /tmp/p10-monitor.log; }
p10_kernel_errors() { dmesg | grep -cE 'I/O error|EXT4-fs (error|warning)'; }

# p10_rounds TAG SIGNAL ROUNDS: ROUNDS times: wait for the monitor's reconnect,
# a random 0.2-0.8 s of fio, a file written with fsync, SIGNAL, start again.
p10_rounds() {
    _tag=$1 _sig=$2 _rounds=$3 _r=0
    p10_load_start "$_tag"
    while [ $_r -lt "$_rounds" ]; do
        _want=$(( $(p10_reconnects) + 1 ))
        usleep $(( $(od -An -N2 -tu2 /dev/urandom) % 600000 + 200000 ))
        dd if=/dev/urandom of="$P10_MNT/$_tag$_r" bs=64k count=2 conv=fsync 2>/dev/null || echo "fsync write failed"
        (cd "$P10_MNT" && sha256sum "$_tag$_r") >> /tmp/p10.sha256
        if [ "$_sig" = KILL ]; then
            kill -KILL "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null
        else
            server_signal TERM 15 || echo "SIGTERM: $SERVER_STATUS"
        fi
        server_start "p10-$_tag-$_r" >/dev/null || return 1
        vt_wait_for 20 sh -c "[ \$(grep -c 'reconnected to' /tmp/p10-monitor.log) -ge $_want ]" ||
            { echo "round $_r: no reconnect"; tail -n 5 /tmp/p10-monitor.log; }
        _r=$((_r + 1))
    done
    p10_load_stop "$_tag"
}

# p10_load_start TAG: the fio loop in the background, kernel errors counted from now.
p10_load_start() {
    rm -f /tmp/p10.stop
    p10_fio_loop "$1" &
    P10_LOOP=$!
    P10_ERRORS0=$(p10_kernel_errors)
}

# p10_load_stop TAG: stop the loop; true when no fio run and no kernel I/O
# failed since p10_load_start (P10_IO_ERRORS, P10_STALL: the longest I/O).
p10_load_stop() {
    touch /tmp/p10.stop
    wait "$P10_LOOP"
    _runs=$(wc -l < "/tmp/p10-$1.res")
    _failed=$(awk '$1 != 0' "/tmp/p10-$1.res" | wc -l)
    _kerr=$(( $(p10_kernel_errors) - P10_ERRORS0 ))
    P10_IO_ERRORS=$((_failed + _kerr))
    P10_STALL=$(awk '$2 > m {m = $2} END {print m + 0}' "/tmp/p10-$1.res")
    vt_info "p10 $1: $_runs fio runs, $_failed failed, $_kerr kernel I/O errors, longest I/O ${P10_STALL} ms," \
        "$(p10_reconnects) reconnects so far"
    [ "$_failed" = 0 ] || { grep -m5 -E 'err=|verify' /tmp/p10-"$1"-failed-*.json; }
    [ "$_kerr" = 0 ] || dmesg | grep -E 'I/O error|EXT4-fs' | tail -n 5
    [ "$P10_IO_ERRORS" = 0 ]
}

p10_crash() {
    p10_rounds crash KILL "$P10_ROUNDS"
    _rc=$?
    vt_kv crash_rounds "$P10_ROUNDS"
    vt_kv crash_io_errors "$P10_IO_ERRORS"
    vt_kv crash_max_stall_ms "$P10_STALL"
    return $_rc
}
p10_restart() {
    p10_rounds restart TERM "$P10_RESTART_ROUNDS"
    _rc=$?
    # restart_*: the hand-over's (point 11); this is stop + start with a reconnect
    vt_kv reattach_restart_rounds "$P10_RESTART_ROUNDS"
    vt_kv reattach_restart_io_errors "$P10_IO_ERRORS"
    vt_kv reattach_restart_max_stall_ms "$P10_STALL"
    return $_rc
}

# Every file written with fsync before a kill, after umount + e2fsck + remount.
p10_files_intact() {
    umount "$P10_MNT" && e2fsck -fn "$P10_DEV" >/tmp/p10-fsck.out 2>&1 &&
        mount -t ext4 "$P10_DEV" "$P10_MNT" &&
        (cd "$P10_MNT" && sha256sum -c /tmp/p10.sha256 >/tmp/p10.check 2>&1) ||
        { tail -n 5 /tmp/p10-fsck.out; grep -v ': OK' /tmp/p10.check; return 1; }
}

# The daemon restarts with the export grown from 64 to 96 MiB while fio
# writes: the monitor's reconnect gives the kernel the new socket, then the
# new size (NBD_CMD_RECONFIGURE with NBD_ATTR_SIZE_BYTES), and the new end
# reads, under the mounted filesystem. Both in one message hung until the
# dead-connection timeout and failed I/O: the kernel sets the size first, and
# that waits for the requests that wait for the socket.
p10_grow() {
    _want=$(( $(p10_reconnects) + 1 ))
    sed -i 's/size: 64MiB/size: 96MiB/' "$P10_CONF"
    p10_load_start grow
    usleep 300000
    server_signal TERM 15 || echo "SIGTERM: $SERVER_STATUS"
    server_start p10-grow >/dev/null || { p10_load_stop grow; return 1; }
    vt_wait_for 20 sh -c "[ \$(grep -c 'reconnected to' /tmp/p10-monitor.log) -ge $_want ]" ||
        { echo "no reconnect"; tail -n 5 /tmp/p10-monitor.log; p10_load_stop grow; return 1; }
    usleep 300000
    p10_load_stop grow || return 1
    _sectors=$(cat "/sys/block/${P10_DEV#/dev/}/size")
    vt_kv p10_grown_sectors "$_sectors"
    [ "$_sectors" = $((96 * 2048)) ] || { echo "size $_sectors sectors"; tail -n 5 /tmp/p10-monitor.log; return 1; }
    grep -q 'grew from 67108864 to 100663296 bytes' /tmp/p10-monitor.log || { tail -n 5 /tmp/p10-monitor.log; return 1; }
    _tail=$(dd if="$P10_DEV" bs=1M skip=95 count=1 2>/dev/null | wc -c)
    [ "$_tail" = 1048576 ] || { echo "read $_tail bytes of the new last MiB"; return 1; }
}

p10_monitor_gone() { ! pid_running "$P10_MONITOR"; }
p10_detach() {
    umount "$P10_MNT" 2>/dev/null
    timeout 20 "$VM_DAEMON" detach "$P10_DEV" || { echo "detach: rc=$?"; return 1; }
    vt_wait_for 10 dev_detached "$P10_DEV" || { echo "$P10_DEV still attached"; return 1; }
    if ! vt_wait_for 10 p10_monitor_gone; then
        echo "the monitor did not exit"; tail -n 5 /tmp/p10-monitor.log; kill -KILL "$P10_MONITOR"; return 1
    fi
    wait "$P10_MONITOR"
    _rc=$?
    vt_kv p10_monitor_exit "$_rc"
    vt_kv p10_status_errors "$(grep -c NBD_CMD_STATUS /tmp/p10-monitor.log)"
    grep -m1 NBD_CMD_STATUS /tmp/p10-monitor.log
    [ "$_rc" = 0 ]
}

p10_reattach() {
    if [ "${VM_SERVER:-nbdsched}" != nbdsched ]; then vt_skip p10 "nbdsched attach needs the nbdsched daemon"; return 0; fi
    mkdir -p "$P10_MNT"
    : > /tmp/p10.sha256
    p10_write_config
    _main_conf=$CONF
    CONF=$P10_CONF
    vt_step p10-server-start p10_use_config p10 || { CONF=$_main_conf; return 1; }
    p10_points
    # after a failure: nothing left attached or monitoring for later points
    umount "$P10_MNT" 2>/dev/null
    dev_attached "$P10_DEV" && timeout 20 "$VM_DAEMON" detach "$P10_DEV"
    [ -n "$P10_MONITOR" ] && pid_running "$P10_MONITOR" && kill "$P10_MONITOR"
    CONF=$_main_conf
    vt_step p10-main-server-again p10_use_config after-p10
}

p10_points() {
    vt_step p10-attach p10_attach || return 1
    vt_step p10-mkfs-mount sh -c "mkfs.ext4 -q -F $P10_DEV && mount -t ext4 $P10_DEV $P10_MNT" || return 1
    vt_step p10-crash-rounds p10_crash
    vt_step p10-restart-rounds p10_restart
    vt_step p10-fsynced-files-intact p10_files_intact
    vt_step p10-export-grows-device p10_grow
    vt_kv p10_reconnects "$(p10_reconnects)"
    vt_kv p10_requeued_timeouts "$(dmesg | grep -c 'Connection timed out')"
    vt_step p10-detach-monitor-exits p10_detach
}
