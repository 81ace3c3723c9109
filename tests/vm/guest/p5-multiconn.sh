# p5-multiconn.sh - point 5: nbd-client -C 2 (needs NBD_FLAG_CAN_MULTI_CONN)
# and both connections carry I/O: the daemon's per-queue counters (one queue
# per connection, `nbdsched ctl stats`) show >= 1 MiB read on each.  Over TCP
# so that ss (sock_diag) shows each connection's byte counters too: that is
# the check for a server without nbdsched's stats (nbdkit), and information
# otherwise.
P5_MIN_BYTES=$((1 << 20))

# per-connection bytes received by the client side from the server
p5_conn_bytes() {
    ss -tinH state established "( dport = :$PORT )" 2>/dev/null |
        grep -o 'bytes_received:[0-9]*' | cut -d: -f2
}
p5_both_carry() {
    _n=0 _busy=0
    for _b in $(p5_conn_bytes); do
        _n=$((_n + 1))
        vt_kv "p5_conn${_n}_bytes_received" "$_b"
        [ "$_b" -ge $P5_MIN_BYTES ] && _busy=$((_busy + 1))
    done
    vt_kv p5_connections "$_n"
    [ $_n = 2 ] && [ $_busy = 2 ]
}

# the daemon's view: export data has 2 open queues, each read >= 1 MiB
p5_daemon_queues_carry() {
    stats_snapshot || return 1
    _n=0 _busy=0
    for _b in $(queue_counters data read_bytes); do
        _n=$((_n + 1))
        vt_kv "p5_queue${_n}_read_bytes" "$_b"
        [ "$_b" -ge $P5_MIN_BYTES ] && _busy=$((_busy + 1))
    done
    vt_kv p5_daemon_queues "$_n"
    [ $_n = 2 ] && [ $_busy = 2 ]
}

p5_multiconn() {
    modprobe tcp_diag 2>/dev/null
    dev_attached /dev/nbd0 && detach /dev/nbd0
    vt_step p5-attach-C2 attach_tcp /dev/nbd0 data -C 2 || return 1
    # debugfs names no CAN_MULTI_CONN; its bit is 0x100 of the hex value
    _fl=$(sed -n 's/^Hex: *//p' /sys/kernel/debug/nbd/nbd0/flags 2>/dev/null)
    vt_kv p5_transmission_flags "$_fl"
    vt_step p5-can-multi-conn [ $(( ${_fl:-0} & 0x100 )) != 0 ]
    vt_step p5-fio-2-jobs fio --name=p5 --filename=/dev/nbd0 --ioengine=libaio \
        --direct=1 --rw=randread --bs=64k --iodepth=16 --numjobs=2 \
        --size=64M --runtime=3 --time_based --group_reporting --eta=never \
        --output=/tmp/p5.out
    if ctl_available; then
        vt_step p5-both-queues-carry-io p5_daemon_queues_carry
        vt_check p5-both-connections-carry-io-ss p5_both_carry
    else
        vt_step p5-both-connections-carry-io p5_both_carry
    fi
    vt_step p5-detach detach /dev/nbd0
}
