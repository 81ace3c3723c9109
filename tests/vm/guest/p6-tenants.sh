# p6-tenants.sh - point 6: two tenants on one disk.  Per scheduler, one
# shared `profile: hdd` device (server.sh's config: shared-cfq, shared-bfq)
# with two exports in groups gold (weight 1000) and bronze (weight 100),
# attached as nbd0 and nbd1; one fio run reads both at once (direct,
# libaio, random 4 KiB, iodepth 16), then one writes both at once the same
# way: O_DIRECT writes reach the daemon as plain NBD writes, which the
# device's default (writes_sync) weighs like reads.  Random writes for the
# same reason as random reads: sequential 4 KiB writes would leave TCG, not
# the disk's seeks, as the bottleneck.  Small requests on purpose: the
# emulated disk must be the bottleneck, not TCG.  With 128 KiB reads the
# guest's nbd receive path (copying replies under TCG) capped both tenants
# at ~120 requests/s, so the daemon saw only 0-5 of each tenant's 16
# requests at a time: gold's queue kept running dry, cfq (rightly, as the
# kernel does) would not idle across the long gaps, and the groups took
# turns about one for one (ratios 0.4-1.8 over the runs of 2026-11-30).
# At 4 KiB the disk's seeks dominate, the daemon sees ~14 of gold's
# requests waiting, and cfq measured 3.9:1, bfq 4.0:1.
# The bandwidth ratio gold/bronze is printed and must exceed P6_MIN_RATIO
# (generous, since TCG is slow and noisy).  The daemon's own view must
# agree: the queues sit in the exports' groups, and group gold read (wrote)
# more bytes than bronze.
P6_SCHEDULERS=${VM_P6_SCHEDULERS:-cfq bfq}
P6_MIN_RATIO=${VM_P6_MIN_RATIO:-1.5}
P6_RUNTIME=${VM_P6_RUNTIME:-5}
# Extra cfq tunables for the shared device, e.g. "slice_idle: 20ms, group_idle: 20ms"
P6_CFQ_TUNABLES=${VM_P6_CFQ_TUNABLES:-}
# Request size of the fio jobs (see above for why 4k).
P6_BS=${VM_P6_BS:-4k}
# p6_tunables SCHED: the ", tunables: {...}" part of the shared device (server.sh)
p6_tunables() { [ "$1" = cfq ] && [ -n "$P6_CFQ_TUNABLES" ] && echo ", tunables: {$P6_CFQ_TUNABLES}"; }

# p6_fio SCHED DIR: both tenants at once, DIR read or write; prints
# "GOLD_KIB BRONZE_KIB" (bandwidth, KiB/s, from fio's terse output: field 3
# job name, 7 read bw, 48 write bw)
p6_fio() {
    _f=7; [ "$2" = write ] && _f=48
    fio --ioengine=libaio --direct=1 --rw="rand$2" --bs="$P6_BS" --iodepth=16 \
        --time_based --runtime="$P6_RUNTIME" --ramp_time=1 --eta=never \
        --output-format=terse --output="/tmp/p6-$1-$2.out" \
        --name=gold --filename=/dev/nbd0 --name=bronze --filename=/dev/nbd1 || return 1
    awk -F';' -v f="$_f" '$3 == "gold" { g = $f } $3 == "bronze" { b = $f }
               END { if (g == "" || b == "") exit 1; print g, b }' "/tmp/p6-$1-$2.out"
}

# p6_ratio_ok GOLD BRONZE: GOLD/BRONZE > P6_MIN_RATIO (bronze 0 counts as
# infinitely starved: still the weights' direction)
p6_ratio_ok() {
    awk -v g="$1" -v b="$2" -v m="$P6_MIN_RATIO" 'BEGIN { exit !(g > 0 && (b == 0 || g / b > m)) }'
}

# p6_queues_grouped SCHED: the daemon put each export's queue in its group
p6_queues_grouped() {
    stats_snapshot || return 1
    _g=$(stats_value "$(stats_prefix queues export "gold-$1" | head -n 1)\.group")
    _b=$(stats_value "$(stats_prefix queues export "bronze-$1" | head -n 1)\.group")
    vt_kv "p6_${1}_queue_groups" "gold-$1:${_g:-?} bronze-$1:${_b:-?}"
    [ "$_g" = gold ] && [ "$_b" = bronze ]
}

# p6_daemon_agrees SCHED DIR: group gold read (DIR read) or wrote more bytes
# than bronze there
p6_daemon_agrees() {
    stats_snapshot || return 1
    _g=$(group_counter "shared-$1" gold "${2}_bytes")
    _b=$(group_counter "shared-$1" bronze "${2}_bytes")
    vt_kv "p6_${1}_daemon_${2}_bytes" "gold=${_g:-?} bronze=${_b:-?}"
    vt_kv "p6_${1}_daemon_slices" "gold=$(group_value "shared-$1" gold sched.slices) bronze=$(group_value "shared-$1" bronze sched.slices)"
    [ -n "$_g" ] && [ -n "$_b" ] && [ "$_g" -gt "$_b" ]
}

p6_attach() { attach /dev/nbd0 "gold-$1" && attach /dev/nbd1 "bronze-$1"; }
p6_detach() { _r=0; detach /dev/nbd0 || _r=1; detach /dev/nbd1 || _r=1; return $_r; }

# p6_direction SCHED DIR: one fio run in direction DIR (read or write); the
# read run keeps its original step and key names
p6_direction() {
    _n=$1; [ "$2" = write ] && _n=$1-write
    _k=$(echo "$_n" | tr - _)
    if _bw=$(p6_fio "$1" "$2"); then
        set -- "$1" "$2" $_bw
        vt_kv "p6_${_k}_gold_kib_s" "$3"
        vt_kv "p6_${_k}_bronze_kib_s" "$4"
        vt_kv "p6_${_k}_ratio" "$(awk -v g="$3" -v b="$4" 'BEGIN { if (b > 0) printf "%.2f", g / b; else print "inf" }')"
        vt_step "p6-$_n-gold-gets-more" p6_ratio_ok "$3" "$4"
        vt_step "p6-$_n-daemon-agrees" p6_daemon_agrees "$1" "$2"
    else
        vt_step "p6-$_n-fio" false
        tail -n 20 "/tmp/p6-$1-$2.out"
    fi
}

p6_one() {
    vt_step "p6-$1-attach" p6_attach "$1" || { p6_detach; return 1; }
    vt_step "p6-$1-queues-in-groups" p6_queues_grouped "$1"
    p6_direction "$1" read
    p6_direction "$1" write
    vt_step "p6-$1-detach" p6_detach
}

p6_tenants() {
    if [ "${VM_SERVER:-nbdsched}" = nbdkit ]; then
        vt_skip p6-weighted-tenants "nbdkit memory has no groups or schedulers (harness check run)"
        return 0
    fi
    dev_attached /dev/nbd0 && detach /dev/nbd0
    for _s in $P6_SCHEDULERS; do p6_one "$_s"; done
}
