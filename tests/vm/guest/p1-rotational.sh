# p1-rotational.sh - point 1: an hdd (rotational) device gives
# queue/rotational = 1 on 6.12 (NBD_FLAG_ROTATIONAL), an ssd device 0.
p1_rotational() {
    if [ "${VM_SERVER:-nbdsched}" = nbdkit ]; then
        vt_skip rotational "nbdkit memory sends no NBD_FLAG_ROTATIONAL (harness check run)"
        return 0
    fi
    vt_step p1-attach-hdd attach /dev/nbd0 hdd || return 1
    vt_step p1-attach-ssd attach /dev/nbd1 ssd || return 1
    vt_kv hdd_rotational "$(qattr nbd0 rotational)"
    vt_kv ssd_rotational "$(qattr nbd1 rotational)"
    [ -e /sys/kernel/debug/nbd/nbd0/flags ] &&
        vt_kv hdd_debugfs_flags "$(tr '\n' ' ' < /sys/kernel/debug/nbd/nbd0/flags)"
    vt_step p1-hdd-rotational-1 [ "$(qattr nbd0 rotational)" = 1 ]
    vt_step p1-ssd-rotational-0 [ "$(qattr nbd1 rotational)" = 0 ]
    vt_step p1-detach detach /dev/nbd0 && vt_step p1-detach-ssd detach /dev/nbd1
}
