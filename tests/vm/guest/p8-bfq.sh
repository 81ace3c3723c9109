# p8-bfq.sh - point 8: the guest kernel's bfq on top of nbd0 with nbdsched's
# own scheduler underneath: no deadlock, just a smoke check with verify.
p8_bfq() {
    dev_attached /dev/nbd0 || vt_step p8-attach attach /dev/nbd0 data || return 1
    vt_step p8-select-bfq sh -c 'echo bfq > /sys/block/nbd0/queue/scheduler' || return 1
    vt_kv p8_scheduler "$(qattr nbd0 scheduler)"
    vt_step p8-bfq-active grep -q '\[bfq\]' /sys/block/nbd0/queue/scheduler
    vt_step p8-fio-on-bfq timeout 120 fio --name=p8 --filename=/dev/nbd0 \
        --ioengine=libaio --direct=1 --rw=randrw --bs=4k --iodepth=16 --numjobs=2 \
        --size=4M --offset_increment=4M --verify=crc32c --group_reporting \
        --eta=never --output=/tmp/p8.out || tail -n 20 /tmp/p8.out
    echo none > /sys/block/nbd0/queue/scheduler
}
