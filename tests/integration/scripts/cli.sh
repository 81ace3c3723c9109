#!/bin/bash
# The nbdsched command line: --help, --version, --check-config on good and bad
# files and tls: files (exit status, and errors naming file:line:column and the key), and a
# start-up error (a file device too small for an export) before anything listens.
set -uo pipefail
[ -n "${NBDSCHED:-}" ] && [ -x "$NBDSCHED" ] || { echo "SKIP: nbdsched not built (NBDSCHED unset)"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

"$NBDSCHED" --help > "$tmp/help" 2>&1 && ok "--help exits 0" || fail "--help exits non-zero"
grep -q -- '--config' "$tmp/help" && ok "--help mentions --config" || fail "--help lacks --config"
grep -q -- '--check-config' "$tmp/help" && ok "--help mentions --check-config" \
    || fail "--help lacks --check-config"
"$NBDSCHED" --version > "$tmp/version" 2>&1 && ok "--version exits 0" || fail "--version exits non-zero"
grep -qE '[0-9]+\.[0-9]+\.[0-9]+' "$tmp/version" && ok "--version prints a version" \
    || fail "--version prints no version: $(cat "$tmp/version")"
# The commit the binary was built from: this script's checkout, when it is one
# and the binary is its build (a stale binary names an older commit).
src=$(cd "$(dirname "$0")" && git rev-parse --show-toplevel 2>/dev/null)
if [ -n "$src" ]; then
    head=$(git -C "$src" rev-parse HEAD)
    built=$(sed -nE 's/.*\(git ([0-9a-f]+)(-dirty)?\)$/\1/p' "$tmp/version")
    [ -n "$built" ] && [ "${head#"$built"}" != "$head" ] && ok "--version names the checkout's commit ($built)" \
        || fail "--version names no commit of this checkout (HEAD $head): $(cat "$tmp/version")"
else
    grep -q '(git unknown)' "$tmp/version" && ok "--version says the commit is unknown outside a checkout" \
        || fail "--version outside a checkout: $(cat "$tmp/version")"
fi
"$NBDSCHED" --no-such-option > /dev/null 2>&1 && fail "an unknown option exits 0" \
    || ok "an unknown option exits non-zero"

# write_config NAME: the good config with sed expression $2 applied.
write_config() {
    cat > "$tmp/$1.yaml" <<YAML
listen:
  - unix: $tmp/never.sock
devices:
  - name: d0
    backend: ram
    size: 64MiB
exports:
  - name: default
    device: d0
  - name: second
    device: d0
    size: 32MiB
YAML
    [ -n "${2:-}" ] && sed -i "$2" "$tmp/$1.yaml"
    return 0
}

write_config good
"$NBDSCHED" --check-config "$tmp/good.yaml" > "$tmp/out" 2>&1 \
    && ok "--check-config accepts a good file" || { fail "--check-config rejects a good file"; cat "$tmp/out"; }
[ -e "$tmp/never.sock" ] && fail "--check-config created the socket" || ok "--check-config does not listen"
grep -q 'SIGHUP reloads the configuration' "$tmp/help" && ok "--help says SIGHUP reloads" \
    || fail "--help does not say what SIGHUP does"
# --listen-tcp/--listen-unix are checked as the listen: keys are: exit 2, the option and value named.
for bad in "tcp 127.0.0.1:0" "tcp ::1:10809" "unix "; do
    set -- $bad
    timeout 10 "$NBDSCHED" -c "$tmp/good.yaml" "--listen-$1" "${2:-}" > "$tmp/out" 2>&1; rc=$?
    if [ $rc -eq 2 ] && grep -qF -- "--listen-$1 '${2:-}'" "$tmp/out"; then ok "--listen-$1 '${2:-}' refused"
    else fail "--listen-$1 '${2:-}': exit $rc"; cat "$tmp/out"; fi
done

# expect_error NAME SED LINE KEY-REGEX: the error names file:LINE:col and the key.
expect_error() {
    local name=$1 expr=$2 line=$3 key=$4
    write_config "$name" "$expr"
    if "$NBDSCHED" --check-config "$tmp/$name.yaml" > "$tmp/out" 2>&1; then
        fail "$name: accepted"
        return
    fi
    if grep -qE "$name\.yaml:$line:[0-9]+" "$tmp/out" && grep -qE "$key" "$tmp/out"; then
        ok "$name: rejected at line $line naming $key"
    else
        fail "$name: error does not name $name.yaml:$line:<col> and '$key':"
        cat "$tmp/out"
    fi
}
expect_error unknown-key   's/    size: 64MiB/    sise: 64MiB/'   6  'sise'
expect_error bad-size      's/    size: 64MiB/    size: 64XB/'    6  'size'
expect_error bad-backend   's/backend: ram/backend: tape/'         5  'backend'
expect_error duplicate     's/name: second/name: default/'         10 'default'
expect_error outside       's/size: 32MiB/size: 128MiB/'           12 'size|second|outside'
expect_error bad-device    's/    device: d0$/    device: nope/;9!{/device: nope/s//device: d0/}' 9 'nope'
expect_error missing-path  's/backend: ram/backend: file/'         5  'path'
expect_error wrong-type    's/^exports:$/exports: 7/;/^  - name: \(default\|second\)$/,$d' 7 'exports'

printf 'listen: [\n  - unix: x\n' > "$tmp/syntax.yaml"
if "$NBDSCHED" --check-config "$tmp/syntax.yaml" > "$tmp/out" 2>&1; then
    fail "a YAML syntax error is accepted"
else
    grep -qE 'syntax\.yaml:[0-9]+:[0-9]+' "$tmp/out" && ok "a YAML syntax error names line:column" \
        || { fail "YAML syntax error without line:column:"; cat "$tmp/out"; }
fi
"$NBDSCHED" --check-config "$tmp/does-not-exist.yaml" > /dev/null 2>&1 \
    && fail "a missing config file is accepted" || ok "a missing config file is an error"

# A file device without a size is measured only when the daemon opens it, so
# an export window past its end is found at start-up, not by --check-config:
# the daemon must still name file:line:column and the key, exit non-zero, and
# never listen.
truncate -s 1MiB "$tmp/small.img"
cat > "$tmp/window.yaml" <<YAML
listen:
  - unix: $tmp/window.sock
devices:
  - name: f0
    backend: file
    path: $tmp/small.img
exports:
  - name: whole
    device: f0
  - name: window
    device: f0
    offset: 512KiB
    size: 1MiB
YAML
timeout 60 "$NBDSCHED" --config "$tmp/window.yaml" > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
    fail "a window past the end of a file device: exit status $rc (want non-zero, no hang)"
    cat "$tmp/out"
elif grep -qE 'window\.yaml:10:[0-9]+: exports\[1\]\.size: .*window.*1MiB' "$tmp/out"; then
    ok "a window past the end of a file device: exit $rc, names window.yaml:line:col and exports[1].size"
else
    fail "a window past the end of a file device: the error does not name window.yaml:<line>:<col> and exports[1].size:"
    cat "$tmp/out"
fi
[ -e "$tmp/window.sock" ] && fail "the daemon listened although an export did not fit" \
    || ok "nothing listens when an export does not fit its file device"

# A configuration that is not a regular file, or is huge: refused at once (no
# read without end of /dev/zero, no wait for a FIFO's writer), in a bounded
# amount of memory. The bound is left out for a sanitizer build, whose shadow
# memory alone needs terabytes of address space.
vm_limit=2000000
grep -qa __asan_init "$NBDSCHED" && vm_limit=unlimited
mkfifo "$tmp/fifo.yaml"
truncate -s 1G "$tmp/huge.yaml"
for c in "/dev/zero:not a regular file (a character device)" "$tmp/fifo.yaml:not a regular file (a FIFO)" \
         "$tmp/huge.yaml:larger than 16MiB"; do
    path=${c%%:*} want=${c#*:}
    (ulimit -v "$vm_limit"; timeout 10 "$NBDSCHED" --check-config "$path") > "$tmp/out" 2>&1; rc=$?
    if [ $rc -eq 1 ] && grep -qF "$path: $want" "$tmp/out"; then ok "--check-config $path: exit 1, $want"
    else fail "--check-config $path: exit $rc (124: still reading)"; cat "$tmp/out"; fi
done

# --check-config reads the files behind tls: as the start would: a PSK file
# that does not parse, a missing or unreadable PSK file, and certificates
# that are missing or not PEM each fail the check (exit 1) with
# file:line:column of the key that names the file (tls.psk_file,
# tls.certificates); good files pass.

# write_tls_config NAME KEY PATH: a config whose tls: gives KEY (psk_file or certificates) PATH, on line 5.
write_tls_config() {
    cat > "$tmp/$1.yaml" <<YAML
listen:
  - unix: $tmp/never.sock
    tls: on
tls:
  $2: $3
devices:
  - {name: d0, backend: ram, size: 16MiB}
exports:
  - {name: e, device: d0}
YAML
}

# expect_tls_error NAME KEY PATH WORDS: --check-config fails naming NAME.yaml:5:col, the key and WORDS.
expect_tls_error() {
    local name=$1 key=$2 path=$3 words=$4
    write_tls_config "$name" "$key" "$path"
    timeout 10 "$NBDSCHED" --check-config "$tmp/$name.yaml" > "$tmp/out" 2>&1; rc=$?
    if [ $rc -eq 1 ] && grep -qE "$name\.yaml:5:[0-9]+: tls\.$key: .*$words" "$tmp/out"; then
        ok "$name: exit 1 at $name.yaml:5 naming tls.$key and '$words'"
    else
        fail "$name: exit $rc, want 1 with $name.yaml:5:<col>: tls.$key: ...$words"; cat "$tmp/out"
    fi
}

# accept_tls NAME KEY PATH: --check-config passes.
accept_tls() {
    write_tls_config "$1" "$2" "$3"
    if timeout 10 "$NBDSCHED" --check-config "$tmp/$1.yaml" > "$tmp/out" 2>&1; then ok "$1: accepted"
    else fail "$1: rejected"; cat "$tmp/out"; fi
}

printf 'alice:0123456789abcdef0123456789abcdef\n' > "$tmp/good.psk"
accept_tls good-psk psk_file "$tmp/good.psk"
printf '# keys\nalice:not-hex\n' > "$tmp/bad.psk"
expect_tls_error bad-psk psk_file "$tmp/bad.psk" "bad\.psk: line 2"
expect_tls_error missing-psk psk_file "$tmp/nope.psk" "nope\.psk: cannot read"
mkdir "$tmp/dir.psk"
expect_tls_error unreadable-psk psk_file "$tmp/dir.psk" "dir\.psk: cannot read"

mkdir "$tmp/certs" "$tmp/empty" "$tmp/junk"
if openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=nbdsched-test -days 2 \
        -keyout "$tmp/certs/server-key.pem" -out "$tmp/certs/server-cert.pem" > /dev/null 2>&1; then
    cp "$tmp/certs/server-cert.pem" "$tmp/certs/ca-cert.pem"
    accept_tls good-certificates certificates "$tmp/certs"
else
    echo "(no openssl to make a certificate: the good-certificate case left out)"
fi
expect_tls_error missing-certificates certificates "$tmp/empty" "server-cert\.pem: cannot read"
echo "not a certificate" > "$tmp/junk/server-cert.pem"
echo "not a key" > "$tmp/junk/server-key.pem"
expect_tls_error junk-certificates certificates "$tmp/junk" "not a PEM certificate"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
