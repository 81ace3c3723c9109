#!/bin/bash
# The embedded default: `nbdsched` with no --config serves one 1 GiB
# RAM export "default" on $XDG_RUNTIME_DIR/nbdsched/nbdsched.sock and on
# 127.0.0.1:10809, and prints how to connect (nbdinfo, nbd-client, fio).
# The TCP port is fixed, so when something else holds it this test skips.
set -uo pipefail
[ -n "${NBDSCHED:-}" ] && [ -x "$NBDSCHED" ] || { echo "SKIP: nbdsched not built (NBDSCHED unset)"; exit 77; }
command -v nbdinfo >/dev/null || { echo "SKIP: nbdinfo not installed"; exit 77; }

port=10809
# Binds the port the way the daemon does (SO_REUSEADDR); fails when it is taken.
port_free() {
    /usr/bin/python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)' "$port"
}
skip_port() { echo "SKIP: port $port in use"; exit 77; }
port_free || skip_port

tmp=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
failures=0
ok()   { echo "ok   $*"; }
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
log="$tmp/daemon.log"

# No --config, no listen options: everything comes from the embedded default.
env XDG_RUNTIME_DIR="$tmp" "$NBDSCHED" > "$log" 2>&1 &
pid=$!
sock="$tmp/nbdsched/nbdsched.sock"

ready=0
for _ in $(seq 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"
        rc=$?
        pid=
        # Taken between the probe and the daemon's bind: still a skip.
        grep -qi 'in use' "$log" && { cat "$log"; skip_port; }
        echo "FAIL the daemon exited with status $rc before it was ready:"
        cat "$log"
        exit 1
    fi
    grep -q 'nbdsched: ready' "$log" && [ -S "$sock" ] && { ready=1; break; }
    sleep 0.1
done
[ "$ready" = 1 ] || { echo "FAIL not ready after 60 s:"; cat "$log"; exit 1; }
ok "ready with no --config; unix socket at \$XDG_RUNTIME_DIR/nbdsched/nbdsched.sock"

# The how-to-connect lines.
expect_line() {   # DESCRIPTION FIXED-STRING...: one line holding all the strings
    local what=$1; shift
    local lines
    lines=$(cat "$log")
    for s in "$@"; do lines=$(grep -F -- "$s" <<<"$lines"); done
    [ -n "$lines" ] && ok "prints $what" || fail "no line for $what (with: $*)"
}
unix_uri="nbd+unix:///default?socket=$sock"
expect_line "the export" "1 GiB" "'default'"
expect_line "nbdinfo on the unix socket" "nbdinfo '$unix_uri'"
expect_line "nbdinfo over TCP" "nbdinfo 'nbd://127.0.0.1:$port/default'"
expect_line "nbd-client on the unix socket" "nbd-client -unix $sock " "-N default"
expect_line "nbd-client over TCP" "nbd-client 127.0.0.1 $port " "-N default"
expect_line "a fio command" "fio --ioengine=nbd" "--uri='$unix_uri'"

# The printed unix URI really serves the default export.
printed=$(grep -o "nbdinfo 'nbd+unix://[^']*'" "$log" | head -n 1 | sed "s/^nbdinfo '//;s/'\$//")
if [ -z "$printed" ]; then
    fail "no nbd+unix URI printed"
elif ! nbdinfo --json "$printed" > "$tmp/info.json" 2> "$tmp/nbdinfo.err"; then
    fail "nbdinfo --json '$printed': $(cat "$tmp/nbdinfo.err")"
else
    /usr/bin/python3 - "$tmp/info.json" <<'PY' || failures=$((failures + 1))
import json, sys
exports = json.load(open(sys.argv[1]))["exports"]
failed = False
def check(cond, what):
    global failed
    print(("ok   " if cond else "FAIL ") + what)
    failed = failed or not cond
check(len(exports) == 1, "nbdinfo --json shows one export")
e = exports[0]
check(e.get("export-name") == "default", "the export is named default (got %r)" % e.get("export-name"))
check(e.get("export-size") == 1 << 30, "the export is 1 GiB (got %r)" % e.get("export-size"))
check(e.get("is_rotational") is False, "the export is non-rotational (got %r)" % e.get("is_rotational"))
check(e.get("is_read_only") is False, "the export is writable")
sys.exit(1 if failed else 0)
PY
fi
size=$(nbdinfo --size "nbd://127.0.0.1:$port/default" 2>&1)
[ "$size" = $((1 << 30)) ] && ok "127.0.0.1:$port serves the 1 GiB default" \
    || fail "nbdinfo --size over TCP: '$size'"

# SIGTERM: exit 0, promptly.
kill -TERM "$pid"
for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
    fail "still running 60 s after SIGTERM"
else
    wait "$pid"
    rc=$?
    pid=
    [ "$rc" -eq 0 ] && ok "SIGTERM: exit 0" || fail "SIGTERM: exit status $rc"
fi

[ "$failures" -eq 0 ] || { echo "--- daemon log:"; cat "$log"; }
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
