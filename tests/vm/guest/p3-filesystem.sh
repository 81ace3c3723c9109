# p3-filesystem.sh - point 3: ext4 on /dev/nbd0: random files, sync, umount,
# drop caches, e2fsck -fn clean, remount, checksums equal.
P3_MNT=/mnt/nbd
p3_write_files() {
    _i=0
    while [ $_i -lt "${VM_FS_FILES:-12}" ]; do
        # 1..2048 KiB each, sizes from /dev/urandom
        _kb=$(( $(od -An -N2 -tu2 /dev/urandom) % 2048 + 1 ))
        dd if=/dev/urandom of=$P3_MNT/f$_i bs=1k count=$_kb 2>/dev/null || return 1
        _i=$((_i + 1))
    done
    (cd $P3_MNT && sha256sum f* > /tmp/p3.sha256)
}
p3_verify_files() { (cd $P3_MNT && sha256sum -c /tmp/p3.sha256 >/tmp/p3.check 2>&1); }

p3_filesystem() {
    dev_attached /dev/nbd0 || vt_step p3-attach attach /dev/nbd0 data || return 1
    mkdir -p $P3_MNT
    vt_step p3-mkfs.ext4 mkfs.ext4 -q -F /dev/nbd0 &&
    vt_step p3-mount mount -t ext4 /dev/nbd0 $P3_MNT &&
    vt_step p3-write-files p3_write_files &&
    vt_kv p3_bytes "$(du -sk $P3_MNT | cut -f1)KiB" &&
    vt_step p3-sync sync &&
    vt_step p3-umount umount $P3_MNT &&
    vt_step p3-drop-caches sh -c 'blockdev --flushbufs /dev/nbd0; echo 3 > /proc/sys/vm/drop_caches' &&
    vt_step p3-e2fsck-clean e2fsck -fn /dev/nbd0 &&
    vt_step p3-remount mount -t ext4 /dev/nbd0 $P3_MNT &&
    vt_step p3-checksums-equal p3_verify_files
    _rc=$?
    [ $_rc = 0 ] || cat /tmp/p3.check 2>/dev/null
    umount $P3_MNT 2>/dev/null
    return $_rc
}
