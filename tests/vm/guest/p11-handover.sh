# p11-handover.sh - point 11: planned restarts by hand-over under plain
# nbd-client (no monitor, nothing reconnects): /dev/nbd4 with ext4 mounted
# and fio --verify running while the daemon is replaced by
# `nbdsched --takeover` again and again. The kernel's connection is passed
# to each new process: no I/O error, no reconnect, no timeout in the kernel
# log, every file written with fsync before a restart reads back, e2fsck is
# clean afterwards.
P11_DEV=/dev/nbd4
P11_MNT=/mnt/p11
P11_ROUNDS=${VM_P11_ROUNDS:-10}
P11_CONF=/tmp/p11.yaml
P11_HANDOVER=/tmp/p11-handover.sock

p11_write_config() {
    cat > "$P11_CONF" <<EOC
listen:
  - unix: $SOCK
  - tcp: 127.0.0.1:$PORT
control: $CTL_SOCK
devices:
  - {name: filedisk, backend: file, path: /tmp/p11.img, size: 64MiB}
exports:
  - {name: handover, device: filedisk}
EOC
}

# p11_log_ms LOG TEXT: the time of LOG's first line with TEXT, in ms of the day
p11_log_ms() {
    awk -v text="$2" 'index($0, text) { split(substr($2, 1, 12), t, ":")
        printf "%d", (t[1] * 3600 + t[2] * 60 + t[3]) * 1000; exit }' "$1"
}

# p11_takeover TAG: a new daemon takes over; the old one must exit 0.
# P11_PAUSE: the longest hand-over seen from the daemons' logs, from the
# old one's "a new process asks" to the new one's "adopted".
p11_takeover() {
    _old=$SERVER_PID
    _oldlog=$SERVER_LOG
    SERVER_LOG=/tmp/server-$1.log
    setsid "$VM_DAEMON" --config "$P11_CONF" --takeover "$P11_HANDOVER" >"$SERVER_LOG" 2>&1 &
    _new=$!
    if ! vt_wait_for 20 sh -c "! grep -q '^State:[^Z]*$' /proc/$_old/status 2>/dev/null"; then
        echo "$1: the old daemon is still running"; server_log; SERVER_PID=$_new; return 1
    fi
    wait "$_old" 2>/dev/null
    _st=$?
    SERVER_PID=$_new
    [ "$_st" = 0 ] || { echo "$1: the old daemon exited $_st"; server_log; return 1; }
    pid_running "$SERVER_PID" || { echo "$1: the new daemon is gone"; server_log; return 1; }
    vt_wait_for 5 grep -q 'hand-over: adopted' "$SERVER_LOG"
    _t1=$(p11_log_ms "$SERVER_LOG" 'hand-over: adopted')
    _t0=$(p11_log_ms "$_oldlog" 'a new process asks')
    _tp=$(p11_log_ms "$_oldlog" 'hand-over: passing')
    _tb=$(p11_log_ms "$_oldlog" 'the new process took over')
    [ -n "$_t0" ] && [ -n "$_t1" ] && [ -n "$_tp" ] && [ -n "$_tb" ] &&
        vt_info "$1: hand-over $((_t1 - _t0)) ms: parked and flushed after $((_tp - _t0)) ms," \
            "old let go after $((_tb - _t0)) ms, new reading after $((_t1 - _t0)) ms"
    if [ -n "$_t0" ] && [ -n "$_t1" ] && [ $((_t1 - _t0)) -gt "$P11_PAUSE" ]; then P11_PAUSE=$((_t1 - _t0)); fi
    return 0
}

p11_rounds() {
    _r=0 _bad=0 P11_PAUSE=0
    rm -f /tmp/p10.stop
    p10_fio_loop handover "$P11_MNT" &
    _loop=$!
    _errors0=$(p10_kernel_errors)
    _nbd0=$(dmesg | grep -c 'nbd4')
    while [ $_r -lt "$P11_ROUNDS" ]; do
        usleep $(( $(od -An -N2 -tu2 /dev/urandom) % 600000 + 200000 ))
        dd if=/dev/urandom of="$P11_MNT/h$_r" bs=64k count=2 conv=fsync 2>/dev/null || echo "fsync write failed"
        (cd "$P11_MNT" && sha256sum "h$_r") >> /tmp/p11.sha256
        p11_takeover "p11-$_r" || _bad=$((_bad + 1))
        _r=$((_r + 1))
    done
    usleep 500000
    touch /tmp/p10.stop
    wait $_loop
    _runs=$(wc -l < /tmp/p10-handover.res)
    _failed=$(awk '$1 != 0' /tmp/p10-handover.res | wc -l)
    _kerr=$(( $(p10_kernel_errors) - _errors0 ))
    # nbd4 in the kernel log: "Receive control failed", "Connection timed out", ... (none expected)
    _knbd=$(( $(dmesg | grep -c 'nbd4') - _nbd0 ))
    P11_IO_ERRORS=$((_failed + _kerr))
    P11_STALL=$(awk '$2 > m {m = $2} END {print m + 0}' /tmp/p10-handover.res)
    vt_info "p11: $P11_ROUNDS hand-overs ($_bad failed), $_runs fio runs, $_failed failed, $_kerr kernel I/O errors," \
        "$_knbd nbd4 kernel messages, longest I/O ${P11_STALL} ms, longest hand-over ${P11_PAUSE} ms"
    dmesg | grep 'nbd4' | tail -n 3
    grep -h 'hand-over:' /tmp/server-p11-*.log | tail -n 2
    vt_kv restart_rounds "$P11_ROUNDS"
    vt_kv restart_io_errors "$P11_IO_ERRORS"
    vt_kv restart_max_stall_ms "$P11_STALL"
    vt_kv restart_kernel_nbd_messages "$_knbd"
    vt_kv restart_handover_max_ms "$P11_PAUSE"
    [ "$_failed" = 0 ] || grep -m5 -E 'err=|verify' /tmp/p10-handover-failed-*.json
    [ "$P11_IO_ERRORS" = 0 ] && [ "$_bad" = 0 ] && [ "$_knbd" = 0 ]
}

p11_files_intact() {
    umount "$P11_MNT" && e2fsck -fn "$P11_DEV" >/tmp/p11-fsck.out 2>&1 &&
        mount -t ext4 "$P11_DEV" "$P11_MNT" &&
        (cd "$P11_MNT" && sha256sum -c /tmp/p11.sha256 >/tmp/p11.check 2>&1) &&
        umount "$P11_MNT" ||
        { tail -n 5 /tmp/p11-fsck.out; grep -v ': OK' /tmp/p11.check; return 1; }
}

p11_start() {
    SERVER_LOG=/tmp/server-p11.log
    rm -f "$SOCK" "$P11_HANDOVER"
    setsid "$VM_DAEMON" --config "$P11_CONF" --handover-socket "$P11_HANDOVER" >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    vt_wait_for 20 sh -c "[ -S $P11_HANDOVER ]" && server_ready || { server_log; return 1; }
}

p11_stop() { server_signal TERM 15 && [ "$SERVER_STATUS" = 0 ]; }

p11_handover() {
    if [ "${VM_SERVER:-nbdsched}" != nbdsched ]; then vt_skip p11 "the hand-over is nbdsched's"; return 0; fi
    mkdir -p "$P11_MNT"
    : > /tmp/p11.sha256
    p11_write_config
    server_signal TERM 15   # the main daemon; p11 runs its own on this point's configuration
    vt_step p11-server-start p11_start || return 1
    if vt_step p11-attach attach "$P11_DEV" handover -t 30 &&
        vt_step p11-mkfs-mount sh -c "mkfs.ext4 -q -F $P11_DEV && mount -t ext4 $P11_DEV $P11_MNT"; then
        vt_step p11-handover-rounds p11_rounds
        vt_step p11-fsynced-files-intact p11_files_intact
    fi
    umount "$P11_MNT" 2>/dev/null
    dev_attached "$P11_DEV" && detach "$P11_DEV"
    vt_step p11-stop-exit-0 p11_stop
    vt_step p11-main-server-again server_start after-p11
}
