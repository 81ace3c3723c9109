# server.sh - guest helpers: write the daemon's config, start/stop the server
# under test, attach/detach /dev/nbdX.  Sourced by e2e.sh (busybox sh).
#
# VM_SERVER   nbdsched (default) | nbdkit (harness check: nbdkit memory 1G
#             serves every export name; no rotational flag)
# VM_DAEMON   path of the nbdsched binary in the guest

SOCK=/run/nbdsched.sock
PORT=10809
CONF=/tmp/nbdsched.yaml
SERVER_PID=
SERVER_LOG=

# Point 1: the hdd/ssd profiles set the rotational flag, and so does an
# explicit `rotational:` on a plain device.  Point 6: one shared hdd device
# per scheduler, its two halves exported to groups weighted 1000 and 100.
# Point 9 (with keys): a `tls: require` TCP listener, its device and export.
# The rest: one RAM device for the data tests.  RAM is sparse: only what is
# written costs memory; reads of unwritten blocks cost the profile's time.
write_config() {
    cat > "$CONF" <<EOC
listen:
  - unix: $SOCK
  - tcp: 127.0.0.1:$PORT
$(p9_config listen)
control: $CTL_SOCK
groups:
  - {name: gold, weight: 1000}
  - {name: bronze, weight: 100}
devices:
  - {name: hdd, backend: ram, size: 64MiB, profile: hdd}
  - {name: ssd, backend: ram, size: 64MiB, profile: ssd}
  - {name: rot, backend: ram, size: 16MiB, rotational: true}
  - {name: nonrot, backend: ram, size: 16MiB, rotational: false}
  - {name: ram0, backend: ram, size: 1GiB, rotational: false}
EOC
    for _s in $P6_SCHEDULERS; do
        echo "  - {name: shared-$_s, backend: ram, size: 1GiB, profile: hdd, scheduler: $_s$(p6_tunables "$_s")}"
    done >> "$CONF"
    p9_config devices >> "$CONF"
    cat >> "$CONF" <<EOC
exports:
  - {name: hdd, device: hdd}
  - {name: ssd, device: ssd}
  - {name: rot, device: rot}
  - {name: nonrot, device: nonrot}
  - {name: data, device: ram0}
EOC
    for _s in $P6_SCHEDULERS; do
        echo "  - {name: gold-$_s, device: shared-$_s, size: 512MiB, group: gold}"
        echo "  - {name: bronze-$_s, device: shared-$_s, offset: 512MiB, group: bronze}"
    done >> "$CONF"
    p9_config exports >> "$CONF"
    p9_config tls >> "$CONF"
}

server_cmd() {
    case ${VM_SERVER:-nbdsched} in
    # nbdkit serves unix or tcp, not both: a second, daemonized instance
    # (separate memory) takes the port, and survives restarts of the first;
    # likewise a third for point 9's TLS port.
    nbdkit) echo "$(p9_nbdkit)nbdkit -i 127.0.0.1 -p $PORT memory 1G; exec nbdkit -f -U $SOCK memory 1G";;
    *) echo "exec $VM_DAEMON --config $CONF";;
    esac
}

# tcp_listening [PORT]: something listens on PORT (default $PORT)
tcp_listening() {
    _p=$(printf '%04X' "${1:-$PORT}")
    grep -Eq "^ *[0-9]+: (0100007F|00000000):$_p 00000000:0000 0A" /proc/net/tcp
}
server_ready() { [ -S "$SOCK" ] && tcp_listening "$PORT"; }

# server_start TAG: start in the foreground of its own session (so a signal
# to the process group reaches whatever sh -c started); wait until both
# sockets listen; fail at once if the server exits.
server_start() {
    SERVER_LOG=/tmp/server-$1.log
    rm -f "$SOCK"
    vt_info "server ($1): $(server_cmd)"
    setsid sh -c "$(server_cmd)" >"$SERVER_LOG" 2>&1 &
    SERVER_PID=$!
    _n=200
    while [ $_n -gt 0 ]; do
        pid_running "$SERVER_PID" || { echo "server exited early"; server_log; return 2; }
        server_ready && return 0
        usleep 100000
        _n=$((_n - 1))
    done
    echo "server not listening after 20 s"; server_log; return 1
}

server_log() {
    echo "----- $SERVER_LOG (last 40 lines) -----"
    tail -n 40 "$SERVER_LOG" 2>/dev/null
    echo "-----"
}

# An exited child stays a zombie until waited for, so kill -0 cannot tell.
pid_running() { [ -e /proc/$1/status ] && ! grep -q '^State:.*Z' /proc/$1/status; }
server_gone() { ! pid_running "$SERVER_PID"; }
# server_signal SIG [SECS]: send SIG, wait up to SECS (10) for the exit;
# SERVER_STATUS = exit status, or "hung" (then it is SIGKILLed).
server_signal() {
    kill "-$1" "$SERVER_PID" 2>/dev/null
    if ! vt_wait_for "${2:-10}" server_gone; then
        echo "server still running ${2:-10}s after SIG$1: SIGKILL"
        kill -KILL "$SERVER_PID"
        wait "$SERVER_PID" 2>/dev/null
        SERVER_STATUS=hung
        return 1
    fi
    wait "$SERVER_PID" 2>/dev/null
    SERVER_STATUS=$?
}

dev_size() { cat "/sys/block/${1#/dev/}/size" 2>/dev/null || echo 0; }
dev_attached() { [ "$(dev_size "$1")" -gt 0 ]; }
dev_detached() { [ "$(dev_size "$1")" = 0 ]; }
qattr() { cat "/sys/block/${1#/dev/}/queue/$2"; }

# attach DEV EXPORT [nbd-client options]: over the unix socket
attach() {
    _dev=$1 _exp=$2; shift 2
    nbd-client -unix "$SOCK" "$_dev" -N "$_exp" "$@" || return 1
    vt_wait_for 10 dev_attached "$_dev"
}
# attach_tcp DEV EXPORT [options]
attach_tcp() {
    _dev=$1 _exp=$2; shift 2
    nbd-client 127.0.0.1 "$PORT" "$_dev" -N "$_exp" "$@" || return 1
    vt_wait_for 10 dev_attached "$_dev"
}
detach() {
    timeout 20 nbd-client -d "$1" >/dev/null 2>&1
    vt_wait_for 10 dev_detached "$1"
}
