# lib/kernel.sh - sourced by vmtest.sh: fetch and unpack a Debian kernel
# package into the cache (apt-get download + dpkg-deb -x; nothing is
# installed, so the host's initramfs-tools/udev/grub stay untouched), and find
# the uncompressed vmlinux for PVH boot.
#
# In:  KERNEL_PKG, CACHE, BUSYBOX, die(), log()
# Out: KERNEL (bzImage), PVH_KERNEL (ELF vmlinux or empty), MODDIR

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }

# extract_vmlinux BZIMAGE OUT: the ELF vmlinux inside a bzImage.  PVH boot of
# the plain ELF skips BIOS real mode and the in-guest decompressor (~4 s
# under TCG).
extract_vmlinux() {
    local img=$1 out=$2 fmt sig pos
    local -a cmd
    for fmt in xz zstd gzip; do
        case $fmt in
        xz) sig=$'\xfd7zXZ'; cmd=(xz -dcq);;
        zstd) sig=$'\x28\xb5\x2f\xfd'; cmd=(zstd -dcq);;
        gzip) sig=$'\x1f\x8b\x08'; cmd=(gzip -dcq);;
        esac
        command -v "${cmd[0]}" >/dev/null || continue
        for pos in $(LC_ALL=C grep -abo "$sig" "$img" 2>/dev/null | cut -d: -f1 | head -n 5); do
            # the decompressors complain about the trailing data; output is complete
            tail -c +$((pos + 1)) "$img" | "${cmd[@]}" > "$out.tmp" 2>/dev/null
            if is_elf "$out.tmp"; then mv "$out.tmp" "$out"; return 0; fi
        done
    done
    rm -f "$out.tmp"
    return 1
}

# unpack_kernel_pkg PKG: download and unpack once, under a lock (several
# test runs may share the cache).
unpack_kernel_pkg() {
    local pkg=$1 deb kv
    local attempt
    # A mirror's hiccup is not a test result: up to 3 downloads, 5 s apart.
    for attempt in 1 2 3; do
        log "fetching $pkg into $CACHE (attempt $attempt)"
        (cd "$CACHE" && rm -f "$pkg"_*.deb && apt-get download -q "$pkg" 2>&1 |
            grep -v 'unsandboxed as root' >&2) || true
        deb=$(ls "$CACHE/$pkg"_*.deb 2>/dev/null | head -n1 || true)
        if [ -n "$deb" ] && dpkg-deb --info "$deb" >/dev/null 2>&1; then break; fi
        rm -f "$CACHE/$pkg"_*.deb; deb=
        [ $attempt = 3 ] || sleep 5
    done
    [ -n "$deb" ] || die "apt-get download $pkg failed 3 times (apt-get update first?)"
    rm -rf "${CACHE:?}/${pkg:?}"
    mkdir -p "$CACHE/$pkg"
    dpkg-deb -x "$deb" "$CACHE/$pkg"
    rm -f "$deb"
    # The package ships no modules.dep (its postinst runs depmod);
    # busybox depmod writes one (it reads .ko.xz too).
    kv=$(ls "$CACHE/$pkg/lib/modules" | head -n1)
    "$BUSYBOX" depmod -b "$CACHE/$pkg" "$kv" || die "depmod failed"
    touch "$CACHE/$pkg/.unpacked"
}

fetch_debian_kernel() {
    local pkg
    mkdir -p "$CACHE" || die "cannot create the kernel cache $CACHE"
    # A metapackage (linux-image-6.12-amd64) stands for the versioned
    # package it depends on.
    pkg=$(apt-cache depends "$KERNEL_PKG" 2>/dev/null |
          awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    [ -n "$pkg" ] || pkg=$KERNEL_PKG
    if [ ! -f "$CACHE/$pkg/.unpacked" ]; then
        # offline, or the archive moved on: reuse any unpacked version of it
        local cached
        cached=$(ls -d "$CACHE"/linux-image-*/.unpacked 2>/dev/null | tail -n1 || true)
        if ! apt-cache show "$pkg" >/dev/null 2>&1 && [ -n "$cached" ]; then
            pkg=$(basename "$(dirname "$cached")")
        fi
    fi
    exec 9>"$CACHE/.lock"
    flock 9
    [ -f "$CACHE/$pkg/.unpacked" ] || unpack_kernel_pkg "$pkg"
    if [ ! -e "$CACHE/$pkg/boot/vmlinux-pvh" ] && [ ! -e "$CACHE/$pkg/.nopvh" ]; then
        if ! grep -qs '^CONFIG_PVH=y' "$CACHE/$pkg"/boot/config-* ||
           ! extract_vmlinux "$(ls "$CACHE/$pkg"/boot/vmlinuz-* | head -n1)" \
                "$CACHE/$pkg/boot/vmlinux-pvh"; then
            touch "$CACHE/$pkg/.nopvh"
        fi
    fi
    flock -u 9
    exec 9>&-
    KERNEL=$(ls "$CACHE/$pkg"/boot/vmlinuz-* | head -n1)
    PVH_KERNEL=
    [ -f "$CACHE/$pkg/boot/vmlinux-pvh" ] && PVH_KERNEL=$CACHE/$pkg/boot/vmlinux-pvh
    MODDIR=$(ls -d "$CACHE/$pkg"/lib/modules/* | head -n1)
}

# default_cache: root shares /var/cache; a user keeps it in $XDG_CACHE_HOME.
default_cache() {
    if [ -n "${NBDSCHED_VMTEST_CACHE:-}" ]; then echo "$NBDSCHED_VMTEST_CACHE"
    elif [ "$(id -u)" = 0 ]; then echo /var/cache/nbdsched-vmtest
    else echo "${XDG_CACHE_HOME:-$HOME/.cache}/nbdsched-vmtest"; fi
}
