# p9-tls.sh - point 9: the kernel's nbd-client over TLS (X.509; nbd-client
# 3.24 has no PSK).  The daemon listens on 127.0.0.1:$TLS_PORT with
# `tls: require` and `verify_clients: true`; the export admits only the
# client certificate's CN.  A plaintext nbd-client and one that expects
# another server name are refused and attach nothing; then ext4 and a
# verified fio run on the TLS device, the daemon's log shows "TLS up", and
# after the detach nbd-client's TLS proxy process is gone.
# Keys: made on the host for each run (lib/tls-keys.sh), in /vmtest/tls.
TLS_PORT=10810
TLS_DIR=/vmtest/tls
P9_DEV=/dev/nbd2
P9_IDENTITY=vm-client

p9_keys() { [ -f $TLS_DIR/server/server-cert.pem ] && [ -f $TLS_DIR/client/client-cert.pem ]; }

# p9_config PART: the TLS parts of the daemon's config (write_config),
# nothing without keys
p9_config() {
    p9_keys || return 0
    case $1 in
    listen) echo "  - {tcp: 127.0.0.1:$TLS_PORT, tls: require}";;
    tls) printf 'tls:\n  certificates: %s\n  verify_clients: true\n' "$TLS_DIR/server";;
    devices) echo "  - {name: tlsram, backend: ram, size: 32MiB, rotational: false}";;
    exports) echo "  - {name: secure, device: tlsram, allow: [{tls_identity: $P9_IDENTITY}]}";;
    esac
}
# the same listener for the harness check: a daemonized nbdkit (server_cmd)
p9_nbdkit() {
    p9_keys || return 0
    echo "nbdkit --tls=require --tls-certificates=$TLS_DIR/server --tls-verify-peer \
-i 127.0.0.1 -p $TLS_PORT memory 32M; "
}

# attach_tls DEV EXPORT [options]: nbd-client checks the server's
# certificate against the CA and the name it dialled (127.0.0.1)
attach_tls() {
    _dev=$1 _exp=$2; shift 2
    nbd-client 127.0.0.1 $TLS_PORT "$_dev" -N "$_exp" -certfile $TLS_DIR/client/client-cert.pem \
        -keyfile $TLS_DIR/client/client-key.pem -cacertfile $TLS_DIR/client/ca-cert.pem "$@" ||
        return 1
    vt_wait_for 10 dev_attached "$_dev"
}

# p9_refused NAME CMD...: CMD fails and P9_DEV stays unattached
p9_refused() {
    _what=$1; shift
    if "$@" >/tmp/p9-refused.out 2>&1; then
        echo "$_what: succeeded"; return 1
    fi
    vt_info "$_what: $(tr '\n' ' ' </tmp/p9-refused.out | cut -c1-200)"
    usleep 300000
    dev_detached $P9_DEV
}
p9_plaintext() { nbd-client 127.0.0.1 $TLS_PORT $P9_DEV -N secure; }

# TLS proxies: nbd-client forks one per TLS attach, with its arguments.
# One grep over every cmdline (a process per file is seconds under TCG);
# the [t] keeps grep from finding its own.
p9_proxies() {
    for _c in $(grep -las 'nbd-clien[t]' /proc/[0-9]*/cmdline); do
        grep -qas "$TLS_PORT" "$_c" && echo "$_c"
    done
}
p9_no_proxy() { [ -z "$(p9_proxies)" ]; }

p9_log_has() { grep -q "$1" "$SERVER_LOG"; }

p9_tls() {
    if ! p9_keys; then
        vt_skip p9-tls "no TLS keys in the guest (certtool missing on the host)"
        return 0
    fi
    dev_attached $P9_DEV && detach $P9_DEV
    vt_step p9-tls-listening vt_wait_for 10 tcp_listening $TLS_PORT || return 1
    vt_step p9-plaintext-refused p9_refused plaintext p9_plaintext
    [ "${VM_SERVER:-nbdsched}" = nbdsched ] &&
        vt_step p9-log-plaintext-refused p9_log_has 'this listener requires TLS'
    vt_step p9-wrong-server-name-refused p9_refused wrong-name \
        attach_tls $P9_DEV secure -tlshostname wrong.example
    vt_step p9-attach-tls attach_tls $P9_DEV secure || return 1
    vt_kv p9_tls_proxies "$(p9_proxies | wc -l)"
    if [ "${VM_SERVER:-nbdsched}" = nbdsched ]; then
        vt_kv p9_log "$(grep -m1 -o 'TLS up.*' "$SERVER_LOG")"
        vt_step p9-log-tls-up-identity p9_log_has "TLS up (TLSv1.*identity '$P9_IDENTITY'"
    else
        vt_skip p9-log-tls-up "$VM_SERVER logs no TLS handshakes"
    fi
    fs_roundtrip p9 $P9_DEV /mnt/nbd-tls 2
    fio_verify p9 $P9_DEV 2M
    vt_step p9-detach detach $P9_DEV
    vt_step p9-tls-proxy-exits vt_wait_for 10 p9_no_proxy
}
