# p2-fio-verify.sh - point 2: fio libaio, direct, 4k randrw, iodepth 32,
# verify=crc32c on /dev/nbd0.  Size-bounded (not time-based) so that fio's
# verify phase runs: every block written is read back and checked.
# 16 MiB: 4096 blocks written and verified, ~17 s under TCG.
P2_SIZE=${VM_FIO_SIZE:-16M}
p2_fio_verify() {
    vt_step p2-attach attach /dev/nbd0 data || return 1
    if vt_step p2-fio-randrw-verify fio --name=p2 --filename=/dev/nbd0 \
            --ioengine=libaio --direct=1 --rw=randrw --bs=4k --iodepth=32 \
            --size="$P2_SIZE" --verify=crc32c --do_verify=1 --verify_fatal=1 \
            --eta=never --output=/tmp/p2.out; then
        vt_kv p2_read "$(grep -m1 -o 'read: IOPS=[^,]*' /tmp/p2.out)"
        vt_kv p2_write "$(grep -m1 -o 'write: IOPS=[^,]*' /tmp/p2.out)"
    else
        tail -n 30 /tmp/p2.out
    fi
    vt_kv p2_verify_errors "$(grep -c 'verify' /tmp/p2.out)"
}
