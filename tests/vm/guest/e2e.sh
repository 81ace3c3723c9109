# e2e.sh - the nbdsched VM test (guest side, busybox sh): the kernel's nbd
# driver on top of the daemon, points p1-p12.  Each check is a
# VMTEST-STEP line; a point that cannot run yet prints VMTEST-SKIP.
. /vmtest/lib.sh
for f in server stats p1-rotational p2-fio-verify p3-filesystem p4-discard \
         p5-multiconn p6-tenants p7-kill p8-bfq p9-tls p10-reattach \
         p11-handover p12-attach-safety; do
    . /vmtest/parts/$f.sh
done

vt_step modprobe sh -c 'modprobe nbd nbds_max=5 && modprobe crc32c_generic && modprobe ext4' ||
    vt_finish
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
write_config
vt_step server-start server_start main || vt_finish

# VM_POINTS (run-vm-test.sh --env VM_POINTS="p6_tenants") runs a subset,
# for investigating one point; the test proper runs them all.
for _point in ${VM_POINTS:-p1_rotational p2_fio_verify p3_filesystem p4_discard \
                            p8_bfq p5_multiconn p6_tenants p9_tls p10_reattach p11_handover \
                            p12_attach_safety p7_kill}; do
    "$_point"
done

dev_attached /dev/nbd0 && detach /dev/nbd0
server_gone || server_signal TERM
if [ $VT_FAILED -ne 0 ] || [ "${VM_SHOW_SERVER_LOG:-0}" = 1 ]; then
    for l in /tmp/server-*.log; do SERVER_LOG=$l server_log; done
    dmesg | tail -n 30
fi
vt_finish
