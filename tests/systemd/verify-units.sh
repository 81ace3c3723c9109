#!/usr/bin/env bash
# verify-units.sh - `systemd-analyze verify` on every nbdsched unit, as meson
# configured them, with the ExecStart binary pointed at the built daemon
# (verify insists that commands exist). Any output counts as a failure:
# verify exits 0 on unknown keys and only warns.
#
#   verify-units.sh BUILD_SYSTEMD_DIR SRC_SYSTEMD_DIR BINDIR DAEMON
set -euo pipefail
build=$1 src=$2 bindir=$3 daemon=$(realpath "$4")

if ! command -v systemd-analyze >/dev/null; then
    echo "SKIP: systemd-analyze is not installed (apt-get install systemd)"; exit 77
fi
[ -x "$daemon" ] || { echo "FAIL: daemon $daemon not built"; exit 1; }

dir=$(mktemp -d /tmp/nbdsched-units.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cp "$build"/nbdsched.service "$build"/nbdsched-nbd@.service \
   "$src"/nbdsched.socket "$src"/examples/srv-nbd0.mount "$dir"/
sed -i "s|$bindir/nbdsched|$daemon|g" "$dir"/*.service

# verify DESCRIPTION UNIT...: 0 when verify is silent and content
verify() {
    local what=$1 out rc; shift
    out=$(cd "$dir" && systemd-analyze verify --man=no "$@" 2>&1) && rc=0 || rc=$?
    if [ $rc = 0 ] && [ -z "$out" ]; then echo "ok   $what"; return 0; fi
    echo "FAIL $what (rc=$rc)"; echo "$out" | sed 's/^/     /'; return 1
}

failed=0
# the template is verified through an instance
verify "nbdsched.service" "$dir/nbdsched.service" || failed=1
verify "nbdsched.socket" "$dir/nbdsched.socket" || failed=1
verify "nbdsched-nbd@nbd0.service" "$dir/nbdsched-nbd@nbd0.service" || failed=1
verify "srv-nbd0.mount" "$dir/srv-nbd0.mount" || failed=1

# The checker itself: a unit with an unknown key must be caught.
cp "$dir/nbdsched.socket" "$dir/broken.socket"
sed -i 's/^\[Socket\]/[Socket]\nListenStreem=\/run\/x.sock/' "$dir/broken.socket"
if verify "broken.socket (must be caught)" "$dir/broken.socket" >/dev/null; then
    echo "FAIL the checker missed an unknown key"; failed=1
else
    echo "ok   a unit with an unknown key is caught"
fi
rm -f "$dir/broken.socket"
exit $failed
