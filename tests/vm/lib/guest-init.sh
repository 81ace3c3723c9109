#!/vmtest/bb/busybox sh
# vmtest guest init (PID 1): mount the API filesystems, run /vmtest/guest.sh,
# send $VMTEST_OUT back over ttyS1 as a tar, print the result line with the
# boot token, power off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/vmtest/bb
/vmtest/bb/busybox --install -s /vmtest/bb
/vmtest/bb/busybox mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
mount -t proc proc /proc
mount -t sysfs sysfs /sys
# /tmp and /run stay on the rootfs (already RAM): a tmpfs mounted over them
# would hide files included there.
chmod 1777 /tmp
mkdir -p /dev/pts /dev/shm /sys/fs/cgroup
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
hostname vmtest
token=$(sed -n 's/.*vmtest\.token=\([0-9a-f]*\).*/\1/p' /proc/cmdline)
echo "VMTEST-BOOTED $token uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r)"
export HOME=/root VMTEST_OUT=/vmtest/out
if [ -e /vmtest/systemd ]; then
    # --systemd: systemd becomes PID 1; vmtest.service runs the script
    echo "$token" > /vmtest/token   # systemd mounts a tmpfs on /run
    exec /lib/systemd/systemd --unit=vmtest.target --log-target=console
fi
cd /vmtest
# Honour a shebang when its interpreter is in the guest.
interp=$(sed -n '1s/^#! *\([^ ]*\).*/\1/p' /vmtest/guest.sh)
[ -n "$interp" ] && [ -x "$interp" ] || interp=sh
( . /vmtest/args.sh; exec "$interp" /vmtest/guest.sh "$@" )
rc=$?
cd /
if [ -n "$(ls -A /vmtest/out 2>/dev/null)" ] && [ -e /dev/ttyS1 ]; then
    stty -F /dev/ttyS1 raw -echo 2>/dev/null
    tar -C /vmtest/out -cf /dev/ttyS1 . || echo "vmtest: could not send /vmtest/out"
fi
sync
echo "VMTEST-RESULT $token rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
poweroff -f
echo o > /proc/sysrq-trigger
sleep 5
