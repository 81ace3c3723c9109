# guest-lib.sh - helpers for vmtest guest scripts (busybox sh).
# Copied into the guest as /vmtest/lib.sh; use:  . /vmtest/lib.sh
#
#   vt_step NAME CMD [ARGS...]   run CMD, print "VMTEST-STEP ok|FAIL NAME",
#                                remember failures; returns CMD's status
#   vt_check NAME CMD...         same, but a failure is only reported, not fatal
#                                for vt_finish (use for informational probes)
#   vt_skip NAME REASON          print "VMTEST-SKIP NAME: SKIP: REASON" (not a pass)
#   vt_info TEXT                 print "VMTEST-INFO TEXT"
#   vt_kv KEY VALUE              print "VMTEST-KV KEY=VALUE" (machine-readable)
#   vt_wait_for SECS CMD...      retry CMD every 0.1 s until it succeeds
#   vt_finish                    print summary; exit 1 if any vt_step failed

VT_FAILED=0
VT_FAILED_NAMES=

vt_now() { cut -d' ' -f1 /proc/uptime; }

vt_step() {
    _vt_name=$1; shift
    _vt_s=$(vt_now)
    echo "VMTEST-STEP start $_vt_name"
    "$@"
    _vt_rc=$?
    _vt_d=$(awk -v a="$_vt_s" -v b="$(vt_now)" 'BEGIN{printf "%.2f", b-a}')
    if [ $_vt_rc -eq 0 ]; then
        echo "VMTEST-STEP ok $_vt_name (${_vt_d}s)"
    else
        echo "VMTEST-STEP FAIL $_vt_name (rc=$_vt_rc, ${_vt_d}s)"
        VT_FAILED=$((VT_FAILED + 1))
        VT_FAILED_NAMES="$VT_FAILED_NAMES $_vt_name"
    fi
    return $_vt_rc
}

vt_check() {
    _vt_name=$1; shift
    "$@"
    _vt_rc=$?
    if [ $_vt_rc -eq 0 ]; then echo "VMTEST-CHECK ok $_vt_name"
    else echo "VMTEST-CHECK no $_vt_name (rc=$_vt_rc)"; fi
    return $_vt_rc
}

vt_skip() { echo "VMTEST-SKIP $1: SKIP: $2"; }

vt_info() { echo "VMTEST-INFO $*"; }
vt_kv() { echo "VMTEST-KV $1=$2"; }

vt_wait_for() {
    _vt_n=$(( $1 * 10 )); shift
    while [ $_vt_n -gt 0 ]; do
        "$@" >/dev/null 2>&1 && return 0
        usleep 100000
        _vt_n=$((_vt_n - 1))
    done
    return 1
}

vt_finish() {
    if [ $VT_FAILED -eq 0 ]; then
        echo "VMTEST-SUMMARY all steps passed"
        exit 0
    fi
    echo "VMTEST-SUMMARY $VT_FAILED step(s) failed:$VT_FAILED_NAMES"
    exit 1
}
