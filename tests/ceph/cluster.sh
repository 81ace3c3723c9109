#!/bin/bash
# A throwaway one-host Ceph cluster for the RBD tests: one monitor and one
# memstore OSD on 127.0.0.1, cephx on, no manager (pools, images and locks
# do not need one). Ready in about a second; ~80 MB idle.
#
#   tests/ceph/cluster.sh start DIR [IMAGE[:SIZE] ...]   (default img1; SIZE default 256M)
#   tests/ceph/cluster.sh stop DIR
#
# start prints `export CEPH_CONF=DIR/ceph.conf` on its last line: librbd,
# librados, fio's rbd engine and the rbd/ceph tools find the cluster (and
# the client.admin key) through it. stop signals only the daemons this start
# recorded in DIR/pids, and only while their command line still names
# DIR/ceph.conf, then removes DIR. Exit 77 with "SKIP: ..." when the Ceph
# packages are missing; 1 when the cluster does not come up (logs in DIR).
#
# Environment: CEPH_STORE_BYTES (memstore cap, default 1 GiB),
# CEPH_START_TIMEOUT (seconds, default 30), CEPH_EXTRA_CONF (more [global] lines).
set -euo pipefail

usage() { echo "usage: $0 start DIR [IMAGE[:SIZE] ...] | stop DIR" >&2; exit 2; }
fail() { echo "cluster.sh: $*" >&2; exit 1; }
[ $# -ge 2 ] || usage
action=$1 dir=$2
shift 2

# --- only ever signal our own daemons (PIDs get reused) ----------------------
is_ours() { [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$dir/ceph.conf"; }
# A zombie is dead: reaping is slow on some hosts.
running() { [ -e "/proc/$1" ] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null; }

stop_daemons() {
    [ -f "$dir/pids" ] || return 0
    # Newest first: a stopping OSD waits for the monitor's acknowledgement,
    # so the monitor must still be there.
    local pid
    for pid in $(tac "$dir/pids"); do
        is_ours "$pid" || continue
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do running "$pid" || break; sleep 0.02; done
        if running "$pid" && is_ours "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
}

pick_port() {
    local port
    for _ in $(seq 50); do
        port=$((20000 + RANDOM % 30000))
        ss -Hltn "sport = :$port" | grep -q . || { echo "$port"; return; }
    done
    fail "no free port"
}

write_conf() {
    local fsid=$1 port=$2
    cat >"$dir/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$port
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv4 = true
ms bind ipv6 = false
ms bind msgr1 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = $dir/keyring
run dir = $dir/run
log file = $dir/\$name.log
log to stderr = false
err to stderr = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
# No manager on purpose: no MGR_DOWN warning after the default grace.
mon mgr mkfs grace = 31536000
# Every map change (OSD boot, pool create, rbd pool init) otherwise waits
# for the monitor's 1 s proposal round: start took ~7 s instead of ~1 s.
paxos propose interval = 0.01
paxos min wait = 0.001
${CEPH_EXTRA_CONF:-}
[mon]
mon data = $dir/mon.\$id
mon cluster log file = $dir/cluster.log
# Per daemon, not [global]: every client would bind the same socket file.
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
[osd]
osd data = $dir/osd.\$id
osd journal = $dir/osd.\$id/journal
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
osd objectstore = memstore
memstore device bytes = ${CEPH_STORE_BYTES:-1073741824}
# 64 KiB pages: faster and ~25% less memory than the default buffer lists.
memstore page set = true
osd memory target = 1073741824
osd crush chooseleaf type = 0
# A stopping OSD waits this long for the monitor (default 5 s).
osd mon shutdown timeout = 1
# The tests SIGSTOP the OSD for 10 s and more. A PG's read lease is 0.8 x
# this grace (default 20 s: 16 s), renewed every few seconds; a pause past it
# leaves the PG laggy, and with no peer to renew the lease this lone OSD then
# held every op as "delayed" for minutes (a 17 s pause did it; with 120 s a
# 40 s pause does not). One OSD has no peers to report it down, so the grace
# changes nothing else here.
osd heartbeat grace = 120
[client]
log file = $dir/client.log
CONF
}

# mon., client.admin and osd.0 in one keyring: ceph-mon --mkfs imports them
# all with their caps, so no `ceph auth add` round trips.
write_keyring() {
    local k=$dir/keyring
    ceph-authtool "$k" --create-keyring --gen-key -n mon. --cap mon 'allow *' >/dev/null
    ceph-authtool "$k" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
    ceph-authtool "$k" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' \
        --cap mgr 'allow profile osd' >/dev/null
}

launch() {   # NAME ARGS...: a daemon in the foreground of its own session
    local name=$1
    shift
    setsid "$@" -f </dev/null >>"$dir/$name.out" 2>&1 &
    echo $! >>"$dir/pids"
}

start() {
    for tool in ceph-mon ceph-osd ceph-authtool monmaptool ceph rbd uuidgen; do
        command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/deps installs Ceph)"; exit 77; }
    done
    [ -e "$dir" ] && fail "$dir already exists"
    mkdir -p "$dir/mon.a" "$dir/osd.0" "$dir/run"
    dir=$(cd "$dir" && pwd)
    local t0 wait=${CEPH_START_TIMEOUT:-30} port fsid osd_uuid
    t0=$(date +%s.%N)
    fsid=$(uuidgen) osd_uuid=$(uuidgen) port=$(pick_port)
    write_conf "$fsid" "$port"
    write_keyring
    # Name the step that failed: the logs alone do not say which it was.
    trap 'rc=$?; stop_daemons; echo "cluster.sh: start failed at line $LINENO (exit $rc): $BASH_COMMAND; logs in $dir" >&2' ERR

    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$port]" "$dir/monmap" >/dev/null
    ceph-mon -c "$dir/ceph.conf" -i a --mkfs --monmap "$dir/monmap" --keyring "$dir/keyring"
    launch mon.a ceph-mon -c "$dir/ceph.conf" -i a
    local ceph="timeout $wait ceph -c $dir/ceph.conf --connect-timeout $wait"
    # Another cluster's monitor on a port taken between pick_port and bind
    # would answer "permission denied": check that ours is the one listening.
    sleep 0.2
    running "$(tail -1 "$dir/pids")" || { trap - ERR; stop_daemons; fail "monitor did not start (port $port?); logs in $dir"; }
    $ceph osd new "$osd_uuid" 0 >/dev/null
    ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$dir/osd.0.out" 2>&1
    launch osd.0 ceph-osd -c "$dir/ceph.conf" -i 0
    $ceph osd pool create rbd 8 8 >/dev/null 2>&1
    # Without a manager `ceph -s` knows no PGs: the OSD map says when it is up.
    local deadline=$((SECONDS + wait))
    until $ceph osd dump 2>/dev/null | grep -Eq '^osd\.0 up +in '; do
        [ $SECONDS -lt $deadline ] || { trap - ERR; stop_daemons; fail "osd.0 not up after ${wait}s; logs in $dir"; }
        sleep 0.1
    done
    timeout "$wait" rbd -c "$dir/ceph.conf" pool init rbd
    local spec
    for spec in "${@:-img1:256M}"; do
        [ "$spec" != "${spec#*:}" ] || spec=$spec:256M
        timeout "$wait" rbd -c "$dir/ceph.conf" create --size "${spec#*:}" "rbd/${spec%%:*}"
    done
    trap - ERR
    printf 'ready in %.2f s (mon port %s)\nexport CEPH_CONF=%s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$port" \
        "$dir/ceph.conf"
}

stop() {
    [ -d "$dir" ] || return 0
    dir=$(cd "$dir" && pwd)
    [ -f "$dir/ceph.conf" ] || fail "$dir has no ceph.conf: not a cluster directory, not removing it"
    stop_daemons
    rm -rf "$dir"
}

case $action in
start) start "$@" ;;
stop) stop ;;
*) usage ;;
esac
