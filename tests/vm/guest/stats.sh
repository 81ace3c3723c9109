# stats.sh - the daemon's own counters in the guest: `nbdsched ctl stats
# --json` (the control socket, config key `control:`), flattened by busybox
# awk into one `path=value` line per scalar, e.g.
#   devices.2.exports.0.name=data
#   devices.2.exports.0.trims=1
#   devices.2.queues.1.counters.read_bytes=8388608
# No jq in the guest (nor on every CI host): this is the whole JSON reader.
CTL_SOCK=/run/nbdsched-control.sock
STATS_FLAT=/tmp/stats.flat

# json_flat < JSON: path=value lines (strings unquoted, escapes kept as is).
# Line by line (JSON strings hold no raw newline), the state carried over:
# one big string walked with substr is quadratic in busybox awk, and guest
# awk runs under TCG.
json_flat() {
    awk '
    function path(   p, k) { p = comp[1]; for (k = 2; k <= d; k++) p = p "." comp[k]; return p }
    {
        s = $0; n = length(s); i = 1
        while (i <= n) {
            c = substr(s, i, 1)
            if (c == "{") { comp[++d] = ""; obj[d] = 1; want[d] = 1; i++ }
            else if (c == "[") { comp[++d] = 0; obj[d] = 0; i++ }
            else if (c == "}" || c == "]") { d--; i++ }
            else if (c == ",") { if (obj[d]) want[d] = 1; else comp[d]++; i++ }
            else if (c == "\"") {
                j = i + 1; t = ""
                while (j <= n && (q = substr(s, j, 1)) != "\"") {
                    if (q == "\\") { t = t q; j++; q = substr(s, j, 1) }
                    t = t q; j++
                }
                i = j + 1
                if (obj[d] && want[d]) { comp[d] = t; want[d] = 0 } else print path() "=" t
            }
            else if (c ~ /[-0-9a-z.+]/) {
                j = i
                while (j <= n && substr(s, j, 1) ~ /[-0-9a-zA-Z.+]/) j++
                print path() "=" substr(s, i, j - i); i = j
            }
            else i++
        }
    }'
}

ctl_available() { [ "${VM_SERVER:-nbdsched}" = nbdsched ]; }

# stats_snapshot: the daemon's stats, flattened, into $STATS_FLAT
stats_snapshot() {
    "$VM_DAEMON" ctl --socket "$CTL_SOCK" stats --json > /tmp/stats.json || return 1
    json_flat < /tmp/stats.json > "$STATS_FLAT" && grep -q '^devices\.' "$STATS_FLAT"
}

# stats_value PATH-REGEX: the value of the first flattened line matching
stats_value() { sed -n "s/^$1=//p" "$STATS_FLAT" | head -n 1; }

# stats_prefix LIST KEY VALUE: paths of the entries of devices.*.LIST whose
# KEY is VALUE (e.g. exports name data -> devices.2.exports.0)
stats_prefix() { sed -n "s/^\(devices\.[0-9]*\.$1\.[0-9]*\)\.$2=$3\$/\1/p" "$STATS_FLAT"; }

# export_counter EXPORT FIELD: a counter (reads, trims, zeroes, read_bytes...)
export_counter() {
    _p=$(stats_prefix exports name "$1" | head -n 1)
    [ -n "$_p" ] && stats_value "$_p\.$2"
}
# group_value DEVICE GROUP SUBPATH (counters.read_bytes, sched.slices...)
group_value() {
    _d=$(sed -n "s/^\(devices\.[0-9]*\)\.name=$1\$/\1/p" "$STATS_FLAT" | head -n 1)
    [ -n "$_d" ] || return 1
    _p=$(sed -n "s/^\($_d\.groups\.[0-9]*\)\.name=$2\$/\1/p" "$STATS_FLAT" | head -n 1)
    [ -n "$_p" ] && stats_value "$_p\.$3"
}
# group_counter DEVICE GROUP FIELD
group_counter() { group_value "$1" "$2" "counters\.$3"; }
# queue_counters EXPORT FIELD: FIELD of every open queue (connection) on EXPORT
queue_counters() {
    for _p in $(stats_prefix queues export "$1"); do stats_value "$_p\.counters\.$2"; done
}
