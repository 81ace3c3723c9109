# p2-fio-verify.sh - point 2: fio libaio, direct, 4k randrw, iodepth 32,
# verify=crc32c on /dev/nbd0.  Size-bounded (not time-based) so that fio's
# verify phase runs: every block written is read back and checked.
# 16 MiB: 4096 blocks written and verified, ~17 s under TCG.
P2_SIZE=${VM_FIO_SIZE:-16M}

# fio_verify TAG DEV SIZE: the verified randrw run on DEV (also point 9's)
fio_verify() {
    if vt_step "$1-fio-randrw-verify" fio --name="$1" --filename="$2" \
            --ioengine=libaio --direct=1 --rw=randrw --bs=4k --iodepth=32 \
            --size="$3" --verify=crc32c --do_verify=1 --verify_fatal=1 \
            --eta=never --output="/tmp/$1.out"; then
        vt_kv "$1_read" "$(grep -m1 -o 'read: IOPS=[^,]*' "/tmp/$1.out")"
        vt_kv "$1_write" "$(grep -m1 -o 'write: IOPS=[^,]*' "/tmp/$1.out")"
    else
        tail -n 30 "/tmp/$1.out"
    fi
    vt_kv "$1_verify_errors" "$(grep -c 'verify' "/tmp/$1.out")"
}

p2_fio_verify() {
    vt_step p2-attach attach /dev/nbd0 data || return 1
    fio_verify p2 /dev/nbd0 "$P2_SIZE"
}
