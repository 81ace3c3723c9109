# p4-discard.sh - point 4: TRIM (blkdiscard) and WRITE_ZEROES (blkdiscard -z)
# on /dev/nbd0 read back as zeros.  The range is first filled with random
# data and checked to be non-zero, so a no-op discard fails the test.
# The daemon's own counters (`nbdsched ctl stats`, export "data") must count
# one more TRIM after blkdiscard and one more WRITE_ZEROES after -z.
# busybox sh prefers its own blkdiscard applet (no -z): use util-linux's.
BLKDISCARD=${VM_BLKDISCARD:-/usr/sbin/blkdiscard}
P4_OFF=$((64 << 20))   # past ext4's first metadata, inside the 1 GiB device
P4_LEN=$((4 << 20))

# nonzero_bytes OFFSET LEN: how many non-zero bytes the device holds there
nonzero_bytes() {
    blockdev --flushbufs /dev/nbd0
    echo 3 > /proc/sys/vm/drop_caches
    dd if=/dev/nbd0 bs=65536 skip=$(($1 / 65536)) count=$(($2 / 65536)) 2>/dev/null |
        tr -d '\000' | wc -c
}
p4_fill() {
    dd if=/dev/urandom of=/dev/nbd0 bs=65536 seek=$(($1 / 65536)) count=$(($2 / 65536)) \
        conv=fsync 2>/dev/null && [ "$(nonzero_bytes "$1" "$2")" -gt 0 ]
}
p4_zeros() { _nz=$(nonzero_bytes "$1" "$2"); vt_kv "p4_nonzero_after_$3" "$_nz"; [ "$_nz" = 0 ]; }

# p4_counted FIELD BEFORE: the export's FIELD counter went up since BEFORE
p4_counted() {
    stats_snapshot || return 1
    _now=$(export_counter data "$1")
    vt_kv "p4_daemon_$1" "${2:-?} -> ${_now:-?}"
    [ -n "$_now" ] && [ -n "$2" ] && [ "$_now" -gt "$2" ]
}
# p4_counter FIELD: now (an export shows up in the stats at its first request: 0 until then)
p4_counter() { stats_snapshot >/dev/null 2>&1 && { _c=$(export_counter data "$1"); echo "${_c:-0}"; }; }

p4_discard() {
    dev_attached /dev/nbd0 || vt_step p4-attach attach /dev/nbd0 data || return 1
    vt_kv p4_discard_max_bytes "$(qattr nbd0 discard_max_bytes)"
    vt_kv p4_write_zeroes_max_bytes "$(qattr nbd0 write_zeroes_max_bytes)"
    ctl_available || vt_skip p4-daemon-counts "$VM_SERVER has no nbdsched control socket"
    vt_step p4-fill-trim-range p4_fill $P4_OFF $P4_LEN &&
    { _before=$(p4_counter trims)
      vt_step p4-blkdiscard $BLKDISCARD -f -o $P4_OFF -l $P4_LEN /dev/nbd0; } &&
    vt_step p4-trim-reads-zeros p4_zeros $P4_OFF $P4_LEN trim
    ctl_available && vt_step p4-daemon-counts-trims p4_counted trims "$_before"
    _off=$((P4_OFF + P4_LEN))
    vt_step p4-fill-zeroout-range p4_fill $_off $P4_LEN &&
    { _before=$(p4_counter zeroes)
      vt_step p4-blkdiscard-z $BLKDISCARD -f -z -o $_off -l $P4_LEN /dev/nbd0; } &&
    vt_step p4-write-zeroes-reads-zeros p4_zeros $_off $P4_LEN write_zeroes
    ctl_available && vt_step p4-daemon-counts-zeroes p4_counted zeroes "$_before"
}
