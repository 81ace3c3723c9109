# lib/systemd-guest.sh - sourced by vmtest.sh for --systemd: the guest's
# /init execs systemd as PID 1 (instead of running the guest script itself),
# with vmtest.target pulling in vmtest.service, which runs the guest script
# on the console and powers off. Host targets/slices and systemd's binaries
# are copied; no udev, no journald (service output goes to the console).
#
# In: ROOT, copy_file(), copy_path()
add_systemd_guest() {
    local f
    copy_file /lib/systemd/systemd /lib/systemd/systemd
    copy_file /usr/bin/systemctl /usr/bin/systemctl
    for f in /lib/systemd/system/*.target /lib/systemd/system/*.slice; do
        copy_file "$f" "$f"
    done
    [ -e /usr/lib/os-release ] && copy_file /usr/lib/os-release /usr/lib/os-release
    mkdir -p "$ROOT/etc/systemd/system"
    # ExecReload=/bin/kill and friends: busybox applets at real paths
    for f in kill sleep true; do
        [ -e "$ROOT/usr/bin/$f" ] || ln -s /vmtest/bb/busybox "$ROOT/usr/bin/$f"
    done
    # no journald here: other units' output to nowhere, quiet status lines
    printf '[Manager]\nDefaultStandardOutput=null\nShowStatus=no\nLogLevel=notice\n' \
        > "$ROOT/etc/systemd/system.conf"
    cat > "$ROOT/etc/systemd/system/vmtest.target" <<'EOT'
[Unit]
Description=vmtest
Requires=vmtest.service
AllowIsolate=yes
EOT
    cat > "$ROOT/etc/systemd/system/vmtest.service" <<'EOT'
[Unit]
Description=vmtest guest script
DefaultDependencies=no
[Service]
Type=oneshot
Environment=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/vmtest/bb
ExecStart=/vmtest/bb/busybox sh /vmtest/systemd-runner.sh
StandardInput=null
StandardOutput=tty
StandardError=tty
TTYPath=/dev/console
EOT
    cat > "$ROOT/vmtest/systemd-runner.sh" <<'EOT'
# runs under systemd: the guest script, then the result line and power off
export HOME=/root VMTEST_OUT=/vmtest/out
cd /vmtest
( . /vmtest/args.sh; exec sh /vmtest/guest.sh "$@" )
rc=$?
sync
echo "VMTEST-RESULT $(cat /vmtest/token) rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
poweroff -f
EOT
    touch "$ROOT/vmtest/systemd"
}
