# systemd-units.sh - guest script run by vmtest.service with systemd as PID 1:
# the installed units for real. nbdsched.socket activates nbdsched.service
# (Type=notify, sandboxed), nbdsched-nbd@nbd0.service attaches /dev/nbd0,
# data goes through, reload works, `systemctl restart` hands the live
# connection over through the fd store, a SIGKILLed daemon is restarted and
# the device reconnected, stopping detaches and the daemon exits 0. Last,
# without the socket unit, a `listen:` with owner/group/mode starts. Then the
# attach unit outlasts a daemon that cannot start until it is fixed.
# Last, the shipped configuration (config/nbdsched.example.yaml, what
# `meson install` puts where the unit reads): its device files are created on
# the first start and `systemctl restart` keeps the attached device's
# connection (no device of it turns the fd store's hand-over off).
# VM_CONFIG: the config path the units read; /vmtest/nbdsched.example.yaml:
# the shipped configuration.
. /vmtest/lib.sh
export SYSTEMD_PAGER= SYSTEMD_COLORS=0
prop() { systemctl show -P "$2" "$1"; }
dev_size() { cat /sys/block/nbd0/size 2>/dev/null || echo 0; }

mkdir -p "$(dirname "$VM_CONFIG")"
write_config() {
    cat > "$VM_CONFIG" <<EOC
listen:
  - unix: /run/nbdsched/nbdsched.sock
  - tcp: 127.0.0.1:10809
control: /run/nbdsched/control.sock
devices:
  - name: d0
    backend: file
    path: /var/lib/nbdsched/d0.img
    size: 256MiB
exports:
  - name: default
    device: d0
EOC
}
write_config
# the daemon's output to a file (no journald in this guest), shown on failure
mkdir -p /etc/systemd/system/nbdsched.service.d
printf '[Service]\nStandardOutput=append:/run/vmtest-nbdsched.log\nStandardError=inherit\nTimeoutStartSec=30s\n' \
    > /etc/systemd/system/nbdsched.service.d/vmtest.conf
vt_step daemon-reload systemctl daemon-reload
vt_step modprobe-nbd modprobe nbd nbds_max=2

vt_step socket-start systemctl start nbdsched.socket
vt_step socket-listening vt_wait_for 5 test -S /run/nbdsched/nbdsched.sock
vt_kv service_before_attach "$(prop nbdsched.service ActiveState)"
vt_step attach-unit-start timeout 60 systemctl start nbdsched-nbd@nbd0.service
vt_step nbd0-attached vt_wait_for 10 sh -c '[ "$(cat /sys/block/nbd0/size)" -gt 0 ]'
vt_kv service_state "$(prop nbdsched.service ActiveState)/$(prop nbdsched.service SubState)"
vt_kv status_text "$(prop nbdsched.service StatusText)"
vt_step service-active [ "$(prop nbdsched.service ActiveState)" = active ]
vt_step status-text-set [ -n "$(prop nbdsched.service StatusText)" ]
vt_step data-roundtrip sh -c 'dd if=/dev/urandom of=/tmp/a bs=64k count=16 2>/dev/null &&
    dd if=/tmp/a of=/dev/nbd0 bs=64k oflag=direct 2>/dev/null &&
    dd if=/dev/nbd0 of=/tmp/b bs=64k count=16 iflag=direct 2>/dev/null && cmp /tmp/a /tmp/b'
vt_step state-file-created test -s /var/lib/nbdsched/d0.img
vt_step reload timeout 60 systemctl reload nbdsched.service
vt_step active-after-reload [ "$(prop nbdsched.service ActiveState)" = active ]
# A reload the daemon refuses (a device's size needs a restart) fails the
# job (ExecReload waits for the outcome through the control socket); the
# configuration in force serves on.
sed -i 's/size: 256MiB/size: 512MiB/' "$VM_CONFIG"
vt_step reload-refused-fails sh -c '! timeout 60 systemctl reload nbdsched.service'
sed -i 's/size: 512MiB/size: 256MiB/' "$VM_CONFIG"
vt_step active-after-refused-reload [ "$(prop nbdsched.service ActiveState)" = active ]
# Planned restart: the unit's --fdstore-handover parks the monitor's
# connection and keeps it in systemd's fd store across `systemctl
# restart`; the new daemon goes on with it (no reconnect) and empties the
# store. Data written before reads back, a write after goes through.
vt_step restart-handover timeout 60 systemctl restart nbdsched.service
vt_step restart-adopted vt_wait_for 10 grep -q 'hand-over: adopted 0 listener(s) and 1 connection(s)' \
    /run/vmtest-nbdsched.log
vt_kv fdstore_after_restart "$(prop nbdsched.service NFileDescriptorStore)"
vt_step fdstore-emptied vt_wait_for 5 sh -c '[ "$(systemctl show -P NFileDescriptorStore nbdsched.service)" = 0 ]'
vt_step data-after-restart sh -c 'dd if=/dev/nbd0 of=/tmp/d bs=64k count=16 iflag=direct 2>/dev/null &&
    cmp /tmp/a /tmp/d && dd if=/tmp/a of=/dev/nbd0 bs=64k seek=16 oflag=direct 2>/dev/null'
# Crash recovery: SIGKILL the daemon; Restart=on-failure starts it again and
# the attach unit's monitor (nbdsched attach) reconnects /dev/nbd0, whose
# data still reads back; the read waits for the new connection, no error.
# The monitor first: restarted (Restart=on-failure), it takes the attached
# device over, and it is the one that reconnects after the daemon's crash.
vt_step monitor-sigkill systemctl kill -s KILL nbdsched-nbd@nbd0.service
vt_step monitor-restarted vt_wait_for 30 sh -c '[ "$(systemctl show -P NRestarts nbdsched-nbd@nbd0.service)" -ge 1 ] &&
    [ "$(systemctl show -P ActiveState nbdsched-nbd@nbd0.service)" = active ]'
vt_step daemon-sigkill systemctl kill -s KILL nbdsched.service
vt_step daemon-restarted vt_wait_for 30 sh -c '[ "$(systemctl show -P NRestarts nbdsched.service)" -ge 1 ] &&
    [ "$(systemctl show -P ActiveState nbdsched.service)" = active ]'
vt_step data-after-crash sh -c 'dd if=/dev/nbd0 of=/tmp/c bs=64k count=16 iflag=direct 2>/dev/null && cmp /tmp/a /tmp/c'
vt_step attach-unit-survives-crash [ "$(prop nbdsched-nbd@nbd0.service ActiveState)" = active ]
vt_step attach-unit-stop timeout 60 systemctl stop nbdsched-nbd@nbd0.service
vt_step nbd0-detached vt_wait_for 10 sh -c '[ "$(cat /sys/block/nbd0/size)" = 0 ]'
vt_step service-stop timeout 60 systemctl stop nbdsched.service
vt_kv service_result "$(prop nbdsched.service Result) exit=$(prop nbdsched.service ExecMainStatus)"
vt_step service-exit-0 [ "$(prop nbdsched.service ExecMainStatus)" = 0 ] &&
    vt_step service-result-success [ "$(prop nbdsched.service Result)" = success ]
vt_step socket-survives-restart test -S /run/nbdsched/nbdsched.sock
# Without the socket unit the daemon binds its own sockets: `listen:` with
# owner/group/mode works under the unit's sandbox (CAP_CHOWN, @chown kept).
vt_step socket-unit-stop systemctl stop nbdsched.socket
cat > "$VM_CONFIG" <<EOC
listen:
  - {unix: /run/nbdsched/group.sock, group: 65534, mode: "0660"}
  - {unix: /run/nbdsched/owner.sock, owner: 65534, group: 65534, mode: "0600"}
devices:
  - {name: d0, backend: file, path: /var/lib/nbdsched/d0.img, size: 256MiB}
exports:
  - {name: default, device: d0}
EOC
vt_step perms-service-start timeout 60 systemctl start nbdsched.service
vt_kv perms_service_state "$(prop nbdsched.service ActiveState)/$(prop nbdsched.service SubState)"
vt_kv perms_group_sock "$(stat -c '%u:%g %a' /run/nbdsched/group.sock 2>&1)"
vt_kv perms_owner_sock "$(stat -c '%u:%g %a' /run/nbdsched/owner.sock 2>&1)"
vt_step perms-group-sock [ "$(stat -c '%u:%g %a' /run/nbdsched/group.sock)" = "0:65534 660" ]
vt_step perms-owner-sock [ "$(stat -c '%u:%g %a' /run/nbdsched/owner.sock)" = "65534:65534 600" ]
vt_step perms-service-stop timeout 60 systemctl stop nbdsched.service
vt_step perms-service-exit-0 [ "$(prop nbdsched.service ExecMainStatus)" = 0 ]
# A daemon that cannot be started (masked here: each attempt then fails at
# once, as a broken daemon's would): the attach unit keeps trying every
# RestartSec and attaches /dev/nbd1 once the daemon can start again.
write_config
vt_step retry-daemon-masked systemctl mask --runtime nbdsched.service
vt_step retry-attach-start systemctl start --no-block nbdsched-nbd@nbd1.service
sleep 20
vt_kv retry_attach_state "$(prop nbdsched-nbd@nbd1.service ActiveState)/$(prop nbdsched-nbd@nbd1.service Result)"
vt_kv retry_attach_restarts "$(prop nbdsched-nbd@nbd1.service NRestarts)"
vt_step retry-attach-not-given-up [ "$(prop nbdsched-nbd@nbd1.service ActiveState)" != failed ]
# Under TCG an attempt takes ~1.5 s, too slow to reach 5 starts in 10 s
# (the unit before restarted 8 times in these 20 s without hitting it; on
# real hardware an attempt takes milliseconds and it gave up within seconds):
# the limit itself must be off.
vt_kv retry_attach_start_limit "$(prop nbdsched-nbd@nbd1.service StartLimitIntervalUSec)"
vt_step retry-attach-no-start-limit [ "$(prop nbdsched-nbd@nbd1.service StartLimitIntervalUSec)" = 0 ]
vt_step retry-daemon-unmasked systemctl unmask --runtime nbdsched.service
vt_step retry-daemon-start timeout 60 systemctl start nbdsched.service
vt_step retry-nbd1-attached vt_wait_for 30 sh -c '[ "$(cat /sys/block/nbd1/size)" -gt 0 ]'
vt_step retry-attach-stop timeout 60 systemctl stop nbdsched-nbd@nbd1.service
vt_step retry-service-stop timeout 60 systemctl stop nbdsched.service
# The shipped configuration as installed, on a clean state directory.
cp /vmtest/nbdsched.example.yaml "$VM_CONFIG"
rm -f /var/lib/nbdsched/*.img
vt_step shipped-socket-start systemctl start nbdsched.socket
vt_step shipped-attach-start timeout 60 systemctl start nbdsched-nbd@nbd0.service
vt_step shipped-nbd0-attached vt_wait_for 10 sh -c '[ "$(cat /sys/block/nbd0/size)" -gt 0 ]'
vt_step shipped-files-created test -f /var/lib/nbdsched/d0.img -a -f /var/lib/nbdsched/disk.img
vt_step shipped-write dd if=/tmp/a of=/dev/nbd0 bs=64k oflag=direct 2>/dev/null
: > /run/vmtest-nbdsched.log
vt_step shipped-restart timeout 60 systemctl restart nbdsched.service
vt_step shipped-restart-adopted vt_wait_for 10 grep -q 'hand-over: adopted 0 listener(s) and 1 connection(s)' \
    /run/vmtest-nbdsched.log
vt_kv shipped_restart_refused "$(grep -c 'no hand-over through the fd store' /run/vmtest-nbdsched.log)"
vt_step shipped-restart-not-refused sh -c '! grep -q "no hand-over through the fd store" /run/vmtest-nbdsched.log'
vt_step shipped-data-after-restart sh -c 'dd if=/dev/nbd0 of=/tmp/e bs=64k count=16 iflag=direct 2>/dev/null &&
    cmp /tmp/a /tmp/e'
vt_step shipped-attach-stop timeout 60 systemctl stop nbdsched-nbd@nbd0.service
vt_step shipped-service-stop timeout 60 systemctl stop nbdsched.service
vt_step shipped-service-exit-0 [ "$(prop nbdsched.service ExecMainStatus)" = 0 ]
if [ $VT_FAILED != 0 ]; then
    systemctl status --no-pager nbdsched.service nbdsched.socket 'nbdsched-nbd@nbd0.service' \
        'nbdsched-nbd@nbd1.service' 2>&1 | tail -n 40
    echo "---- daemon output ----"; tail -n 30 /run/vmtest-nbdsched.log
fi
vt_finish
