#!/usr/bin/env bash
# vmtest.sh - boot a throwaway Linux guest under qemu from a self-contained
# initramfs and run a shell script inside it as root.  The guest script's exit
# status becomes this script's exit status (0 = pass).
#
# The guest shares nothing with the host: the initramfs holds a static
# busybox, the kernel modules asked for (plus dependencies), and every file
# given with --include (ELF files get their shared libraries, found with ldd).
# No NIC (loopback only), no disks.  Kernel: Debian's linux-image-6.12-amd64,
# downloaded (not installed) into a cache that is reused across runs.
set -euo pipefail

PROG=${0##*/}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
    cat <<EOF2
Usage: $PROG [options] --guest-script FILE [-- GUEST_ARGS...]
  --guest-script FILE   busybox-sh script run as root in the guest (cwd /vmtest;
                        files left in \$VMTEST_OUT are copied back to --out)
  --include PATH        PATH (file or dir) at the same path in the guest,
                        ELF files with their libraries. Repeatable.
  --include-as SRC:DST  SRC at DST in the guest. Repeatable.
  --module NAME         kernel module (+deps) for modprobe in the guest. Repeatable.
  --env KEY=VALUE       exported to the guest script. Repeatable.
  --kernel-pkg PKG      Debian kernel package (default linux-image-6.12-amd64)
  --cache DIR           kernel cache (default \$NBDSCHED_VMTEST_CACHE, else
                        /var/cache/nbdsched-vmtest as root, else
                        \$XDG_CACHE_HOME/nbdsched-vmtest)
  --append ARGS         extra kernel command line
  --mem SIZE (2G)  --smp N (2)  --timeout SEC (300)  --accel auto|kvm|tcg
  --log FILE            guest console copy    --out DIR  guest's \$VMTEST_OUT
  --keep                keep the work dir     -q         no console on stdout
  --systemd             boot systemd as PID 1; vmtest.service runs the script
Exit: guest status; 124 timeout; 125 no result (panic); 2 setup error.
EOF2
}

die() { echo "$PROG: error: $*" >&2; exit 2; }
log() { echo "[$PROG] $*" >&2; }

# shellcheck source=lib/kernel.sh
. "$HERE/lib/kernel.sh"
# shellcheck source=lib/initramfs.sh
. "$HERE/lib/initramfs.sh"
# shellcheck source=lib/systemd-guest.sh
. "$HERE/lib/systemd-guest.sh"

GUEST_SCRIPT=
INCLUDES=()      # "SRC:DST"
MODULES=()
ENVS=()
KERNEL_PKG=${VMTEST_KERNEL_PKG:-linux-image-6.12-amd64}
CACHE=$(default_cache)
APPEND=
MEM=2G
SMP=2
TIMEOUT=300
ACCEL_MODE=${VMTEST_ACCEL:-auto}
LOGFILE=
OUTDIR=
KEEP=0
QUIET=0
SYSTEMD=0
GUEST_ARGS=()

while [ $# -gt 0 ]; do
    case $1 in
    --guest-script) GUEST_SCRIPT=$2; shift 2;;
    --include)
        inc=$2; [[ $inc == /* ]] || inc=$PWD/${inc#./}
        INCLUDES+=("$inc:$inc"); shift 2;;
    --include-as) INCLUDES+=("$2"); shift 2;;
    --module) MODULES+=("$2"); shift 2;;
    --env) [[ $2 == *=* ]] || die "--env wants KEY=VALUE"; ENVS+=("$2"); shift 2;;
    --kernel-pkg) KERNEL_PKG=$2; shift 2;;
    --cache) CACHE=$2; shift 2;;
    --append) APPEND="$APPEND $2"; shift 2;;
    --mem) MEM=$2; shift 2;;
    --smp) SMP=$2; shift 2;;
    --timeout) TIMEOUT=$2; shift 2;;
    --accel) ACCEL_MODE=$2; shift 2;;
    --log) LOGFILE=$2; shift 2;;
    --out) OUTDIR=$2; shift 2;;
    --keep) KEEP=1; shift;;
    --systemd) SYSTEMD=1; shift;;
    -q|--quiet) QUIET=1; shift;;
    -h|--help) usage; exit 0;;
    --) shift; GUEST_ARGS=("$@"); break;;
    *) usage >&2; die "unknown argument: $1";;
    esac
done
[ -n "$GUEST_SCRIPT" ] || { usage >&2; die "--guest-script is required"; }
[ -f "$GUEST_SCRIPT" ] || die "guest script not found: $GUEST_SCRIPT"

T0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}'; }

QEMU=$(command -v qemu-system-x86_64 || true)
[ -n "$QEMU" ] || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
BUSYBOX=
for b in /usr/bin/busybox /bin/busybox; do
    if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then BUSYBOX=$b; break; fi
done
[ -n "$BUSYBOX" ] || die "a static busybox is required (apt-get install busybox-static)"

# /dev/kvm here may be PVM (nested paravirtual): a stock kernel crawls under
# it, so auto picks TCG there and KVM only on real hardware virtualization.
kvm_usable() { [ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; }
case $ACCEL_MODE in
auto) if kvm_usable && [ ! -d /sys/module/kvm_pvm ]; then ACCEL_MODE=kvm; else ACCEL_MODE=tcg; fi;;
kvm) kvm_usable || die "/dev/kvm is not usable (try --accel tcg)";;
tcg) ;;
*) die "--accel must be auto, kvm or tcg";;
esac

fetch_debian_kernel
KVER=${MODDIR%/}; KVER=${KVER##*/}

WORKDIR=$(mktemp -d /tmp/nbdsched-vmtest.XXXXXX)
cleanup() { if [ "$KEEP" = 0 ]; then rm -rf "$WORKDIR"; else log "work dir kept: $WORKDIR"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM
ROOT=$WORKDIR/root
build_initramfs
log "initramfs: $(du -m "$WORKDIR/initramfs.cpio" | cut -f1) MiB in $(since "$T0")s; kernel $KVER; accel $ACCEL_MODE"

BOOT_IMAGE=${PVH_KERNEL:-$KERNEL}
CONSOLE=$WORKDIR/console.log
OUTTAR=$WORKDIR/out.tar
: > "$OUTTAR"
if [ "$ACCEL_MODE" = kvm ]; then
    ACCEL=(-accel kvm -cpu host)
else
    ACCEL=(-accel "tcg,thread=multi,tb-size=512" -cpu max)
fi
TOKEN=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
# no_timer_check: on a loaded host TCG is too slow for the kernel's IO-APIC
# timer check, which then panics ("IO-APIC + timer doesn't work").
QEMU_CMD=("$QEMU" -machine q35 "${ACCEL[@]}" -m "$MEM" -smp "$SMP"
    -nodefaults -no-user-config -display none -no-reboot
    -chardev "stdio,id=con0,signal=off" -serial chardev:con0
    -serial "file:$OUTTAR"
    -kernel "$BOOT_IMAGE" -initrd "$WORKDIR/initramfs.cpio"
    -append "console=ttyS0 panic=-1 loglevel=4 no_timer_check vmtest.token=$TOKEN${APPEND}")

T1=$(date +%s.%N)
set +e
if [ "$QUIET" = 1 ]; then
    timeout -k 10 "$TIMEOUT" "${QEMU_CMD[@]}" </dev/null > "$CONSOLE" 2>&1
    qrc=$?
else
    timeout -k 10 "$TIMEOUT" "${QEMU_CMD[@]}" </dev/null 2>&1 | tee "$CONSOLE"
    qrc=${PIPESTATUS[0]}
fi
set -e
VM_SECS=$(since "$T1")
tr -d '\r' < "$CONSOLE" > "$CONSOLE.clean" && mv "$CONSOLE.clean" "$CONSOLE"
[ -n "$LOGFILE" ] && cp "$CONSOLE" "$LOGFILE"
if [ -n "$OUTDIR" ] && [ -s "$OUTTAR" ]; then
    mkdir -p "$OUTDIR"
    tar -C "$OUTDIR" -xf "$OUTTAR" 2>/dev/null || log "warning: guest output archive is damaged"
fi

# A closing "N passed, N failed" line: vt_step results, plus one failure when
# the guest failed outside a step, timed out or crashed.
count_line() {
    local np nf
    np=$(grep -ac 'VMTEST-STEP ok ' "$CONSOLE" || true)
    nf=$(grep -ac 'VMTEST-STEP FAIL ' "$CONSOLE" || true)
    if [ "$1" = 0 ] && [ $((np + nf)) = 0 ]; then np=1; fi
    if [ "$1" != 0 ] && [ "$nf" = 0 ]; then nf=1; fi
    echo "vmtest: $np passed, $nf failed"
}
result=$(grep -ao "VMTEST-RESULT $TOKEN rc=[0-9]* uptime=[0-9.]*" "$CONSOLE" | tail -n1 || true)
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    log "FAIL: timeout after ${TIMEOUT}s (qemu killed); vm time ${VM_SECS}s"
    count_line 124; exit 124
elif [ -z "$result" ]; then
    log "FAIL: guest gave no result (qemu exit $qrc; kernel panic or init died?); vm time ${VM_SECS}s"
    count_line 125; exit 125
fi
grc=$(sed -n 's/.* rc=\([0-9]*\).*/\1/p' <<<"$result")
gup=$(sed -n 's/.* uptime=\([0-9.]*\).*/\1/p' <<<"$result")
if [ "$grc" = 0 ]; then
    log "PASS (vm wall ${VM_SECS}s, guest uptime ${gup}s, total $(since "$T0")s)"
else
    log "FAIL: guest script exit $grc (vm wall ${VM_SECS}s, guest uptime ${gup}s, total $(since "$T0")s)"
fi
count_line "$grc"
exit "$grc"
