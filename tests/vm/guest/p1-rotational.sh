# p1-rotational.sh - point 1: a `profile: hdd` device gives
# queue/rotational = 1 on 6.12 (NBD_FLAG_ROTATIONAL), a `profile: ssd`
# device 0; an explicit `rotational: true|false` on a plain device likewise.

# p1_expect NAME DEV WANT: queue/rotational of DEV is WANT
p1_expect() {
    vt_kv "$1_rotational" "$(qattr "$2" rotational)"
    vt_step "p1-$1-rotational-$3" [ "$(qattr "$2" rotational)" = "$3" ]
}

p1_rotational() {
    if [ "${VM_SERVER:-nbdsched}" = nbdkit ]; then
        vt_skip rotational "nbdkit memory sends no NBD_FLAG_ROTATIONAL (harness check run)"
        return 0
    fi
    vt_step p1-attach-hdd attach /dev/nbd0 hdd &&
    vt_step p1-attach-ssd attach /dev/nbd1 ssd &&
    vt_step p1-attach-rot attach /dev/nbd2 rot &&
    vt_step p1-attach-nonrot attach /dev/nbd3 nonrot || return 1
    [ -e /sys/kernel/debug/nbd/nbd0/flags ] &&
        vt_kv hdd_debugfs_flags "$(tr '\n' ' ' < /sys/kernel/debug/nbd/nbd0/flags)"
    p1_expect hdd nbd0 1
    p1_expect ssd nbd1 0
    p1_expect rot nbd2 1
    p1_expect nonrot nbd3 0
    for _d in 0 1 2 3; do vt_step p1-detach-nbd$_d detach /dev/nbd$_d; done
}
