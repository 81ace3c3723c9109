# lib/tls-keys.sh - sourced by run-vm-test.sh: X.509 credentials for point 9,
# made fresh with certtool for each run (ECDSA: quick to make, and quick to
# use in a TCG guest).  nbd-client 3.24 has no PSK option, so no psktool keys.
#
# make_tls_keys DIR: DIR/server (qemu's layout, for the daemon's
# tls.certificates and nbdkit's --tls-certificates) and DIR/client (for
# nbd-client -certfile -keyfile -cacertfile); the CA's key stays outside DIR.
# Returns 1 when certtool is missing.

tls_key() { certtool --generate-privkey --key-type=ecdsa --outfile "$1" 2>/dev/null; }

# tls_issue CA_DIR OUT_DIR PREFIX TEMPLATE-LINES...
tls_issue() {
    local ca=$1 out=$2 prefix=$3; shift 3
    mkdir -p "$out"
    tls_key "$out/$prefix-key.pem" &&
    printf '%s\n' "$@" > "$ca/$prefix.info" &&
    certtool --generate-certificate --load-privkey "$out/$prefix-key.pem" \
        --load-ca-certificate "$ca/ca-cert.pem" --load-ca-privkey "$ca/ca-key.pem" \
        --template "$ca/$prefix.info" --outfile "$out/$prefix-cert.pem" >/dev/null 2>&1 &&
    cp "$ca/ca-cert.pem" "$out/ca-cert.pem"
}

make_tls_keys() {
    local dir=$1 ca
    command -v certtool >/dev/null || return 1
    ca=$(dirname "$dir")/tls-ca
    mkdir -p "$ca" "$dir"
    tls_key "$ca/ca-key.pem" &&
    printf '%s\n' 'cn = nbdsched VM test CA' ca cert_signing_key 'expiration_days = 2' > "$ca/ca.info" &&
    certtool --generate-self-signed --load-privkey "$ca/ca-key.pem" --template "$ca/ca.info" \
        --outfile "$ca/ca-cert.pem" >/dev/null 2>&1 &&
    # the guest connects to 127.0.0.1; nbd-client checks the name it dialled
    tls_issue "$ca" "$dir/server" server 'cn = localhost' 'dns_name = localhost' \
        'ip_address = 127.0.0.1' tls_www_server signing_key encryption_key 'expiration_days = 2' &&
    tls_issue "$ca" "$dir/client" client 'cn = vm-client' tls_www_client signing_key \
        encryption_key 'expiration_days = 2'
}
