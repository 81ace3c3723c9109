# p3-filesystem.sh - point 3: ext4 on /dev/nbd0: random files, sync, umount,
# drop caches, e2fsck -fn clean, remount, checksums equal.

# fs_write_files MNT COUNT TAG: COUNT files of 1..2048 KiB (sizes from
# /dev/urandom), their checksums in /tmp/TAG.sha256
fs_write_files() {
    _i=0
    while [ $_i -lt "$2" ]; do
        _kb=$(( $(od -An -N2 -tu2 /dev/urandom) % 2048 + 1 ))
        dd if=/dev/urandom of="$1/f$_i" bs=1k count=$_kb 2>/dev/null || return 1
        _i=$((_i + 1))
    done
    (cd "$1" && sha256sum f* > "/tmp/$3.sha256")
}
fs_verify_files() { (cd "$1" && sha256sum -c "/tmp/$2.sha256" >"/tmp/$2.check" 2>&1); }

# fs_roundtrip TAG DEV MNT FILES: the whole check on DEV (also point 9's)
fs_roundtrip() {
    _t=$1 _dev=$2 _mnt=$3
    mkdir -p "$_mnt"
    vt_step "$_t-mkfs.ext4" mkfs.ext4 -q -F "$_dev" &&
    vt_step "$_t-mount" mount -t ext4 "$_dev" "$_mnt" &&
    vt_step "$_t-write-files" fs_write_files "$_mnt" "$4" "$_t" &&
    vt_kv "${_t}_bytes" "$(du -sk "$_mnt" | cut -f1)KiB" &&
    vt_step "$_t-sync" sync &&
    vt_step "$_t-umount" umount "$_mnt" &&
    vt_step "$_t-drop-caches" sh -c "blockdev --flushbufs $_dev; echo 3 > /proc/sys/vm/drop_caches" &&
    vt_step "$_t-e2fsck-clean" e2fsck -fn "$_dev" &&
    vt_step "$_t-remount" mount -t ext4 "$_dev" "$_mnt" &&
    vt_step "$_t-checksums-equal" fs_verify_files "$_mnt" "$_t"
    _rc=$?
    [ $_rc = 0 ] || cat "/tmp/$_t.check" 2>/dev/null
    umount "$_mnt" 2>/dev/null
    return $_rc
}

p3_filesystem() {
    dev_attached /dev/nbd0 || vt_step p3-attach attach /dev/nbd0 data || return 1
    fs_roundtrip p3 /dev/nbd0 /mnt/nbd "${VM_FS_FILES:-12}"
}
