#!/bin/bash
# What the daemon finds at the paths of the sockets it binds: a listen:
# path, the control: path or the --handover-socket path naming a regular
# file or a directory is refused with "exists and is not a socket", and the
# file is still there afterwards (a failed bind must never remove what it
# found).
set -uo pipefail
[ -n "${NBDSCHED:-}" ] && [ -x "$NBDSCHED" ] || { echo "SKIP: nbdsched not built (NBDSCHED unset)"; exit 77; }

tmp=$(mktemp -d)
pid=
# stop SIGNAL: ends the daemon started in the background (if any); its exit status in $rc.
rc=0
stop() {
    [ -n "$pid" ] || return 0
    kill "-$1" "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null; rc=$?
    pid=
}
trap 'stop KILL; rm -rf "$tmp"' EXIT
failures=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# write_config NAME LISTEN-PATH [CONTROL-PATH]
write_config() {
    {
        echo "listen: [{unix: $2}]"
        [ -n "${3:-}" ] && echo "control: $3"
        echo "devices: [{name: d0, backend: ram, size: 16MiB}]"
        echo "exports: [{name: e, device: d0}]"
    } > "$tmp/$1.yaml"
}

# refused_at_start NAME WHAT PATH: the daemon exits non-zero naming PATH as not a socket; PATH survives.
refused_at_start() {
    local name=$1 what=$2 path=$3
    timeout 20 "$NBDSCHED" -c "$tmp/$name.yaml" > "$tmp/$name.out" 2>&1; local rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qE "$path:? exists and is not a socket" "$tmp/$name.out"; then
        ok "$what: refused (exit $rc) as not a socket"
    else
        fail "$what: exit $rc, no 'exists and is not a socket':"; cat "$tmp/$name.out"
    fi
}

# control: naming the configuration file itself (a typo away from the socket).
write_config ctl-file "$tmp/nbd1.sock" "$tmp/ctl-file.yaml"
cp "$tmp/ctl-file.yaml" "$tmp/ctl-file.copy"
refused_at_start ctl-file "control: a regular file" "$tmp/ctl-file.yaml"
cmp -s "$tmp/ctl-file.yaml" "$tmp/ctl-file.copy" && ok "control: the regular file is still there, unchanged" \
    || fail "control: the regular file at the control path was removed or changed"
[ -e "$tmp/nbd1.sock" ] && fail "control: the listener's socket was left behind" \
    || ok "control: the listener's own socket is removed on the way out"

mkdir "$tmp/ctl-dir"
write_config ctl-dir "$tmp/nbd2.sock" "$tmp/ctl-dir"
refused_at_start ctl-dir "control: an empty directory" "$tmp/ctl-dir"
[ -d "$tmp/ctl-dir" ] && ok "control: the directory is still there" \
    || fail "control: the empty directory at the control path was removed"

echo precious > "$tmp/listen-file"
write_config listen-file "$tmp/listen-file"
refused_at_start listen-file "listen: a regular file" "$tmp/listen-file"
grep -qx precious "$tmp/listen-file" 2>/dev/null && ok "listen: the regular file is still there" \
    || fail "listen: the regular file at the listen path was removed or changed"

# --handover-socket on a regular file: the daemon serves on without planned
# restarts, and says why; the file stays.
echo precious > "$tmp/handover-file"
write_config handover "$tmp/nbd3.sock"
"$NBDSCHED" -c "$tmp/handover.yaml" --handover-socket "$tmp/handover-file" > "$tmp/handover.out" 2>&1 &
pid=$!
for _ in $(seq 100); do
    grep -qF "hand-over socket" "$tmp/handover.out" && [ -S "$tmp/nbd3.sock" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$pid" 2>/dev/null && ok "--handover-socket on a regular file: the daemon serves on" \
    || fail "--handover-socket on a regular file: the daemon exited"
grep -qF "hand-over socket $tmp/handover-file: exists and is not a socket" "$tmp/handover.out" \
    && ok "--handover-socket on a regular file: refused as not a socket" \
    || { fail "--handover-socket on a regular file: no 'exists and is not a socket':"; cat "$tmp/handover.out"; }
stop TERM
[ $rc -eq 0 ] && ok "--handover-socket on a regular file: clean stop" || fail "--handover-socket: stop exit $rc"
grep -qx precious "$tmp/handover-file" 2>/dev/null && ok "--handover-socket: the regular file is still there" \
    || fail "--handover-socket: the regular file at the hand-over path was removed or changed"

# No listen: and a $XDG_RUNTIME_DIR so long that the default socket path does
# not fit in sockaddr_un: --check-config and the start say so and exit 1 (not
# an abort), without making the socket's directory.
long_runtime="$tmp/$(printf 'x%.0s' $(seq 100))"
mkdir "$long_runtime"
printf 'devices: [{name: d0, size: 16MiB}]\nexports: [{name: e, device: d0}]\n' > "$tmp/nolisten.yaml"
for how in "--check-config $tmp/nolisten.yaml" "-c $tmp/nolisten.yaml" ""; do
    # shellcheck disable=SC2086   # $how is the options, split on purpose
    XDG_RUNTIME_DIR="$long_runtime" timeout 20 "$NBDSCHED" $how > "$tmp/long.out" 2>&1; rc=$?
    if [ $rc -eq 1 ] && grep -qF "default unix socket $long_runtime/nbdsched/nbdsched.sock (from \$XDG_RUNTIME_DIR) is longer than 107 bytes" "$tmp/long.out"; then
        ok "long default socket path, nbdsched ${how:-(embedded default)}: exit 1, says why"
    else
        fail "long default socket path, nbdsched ${how:-(embedded default)}: exit $rc:"; cat "$tmp/long.out"
    fi
done
[ -e "$long_runtime/nbdsched" ] && fail "long default socket path: its directory was made" \
    || ok "long default socket path: no directory left behind"

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
