# lib/initramfs.sh - sourced by vmtest.sh: build the guest's initramfs (newc
# cpio, uncompressed): static busybox, the kernel modules asked for plus their
# dependencies, the included files with their shared libraries, the guest
# script and an /init that runs it and powers off.
#
# In:  ROOT, WORKDIR, BUSYBOX, MODDIR, KVER, INCLUDES[], MODULES[], ENVS[],
#      GUEST_SCRIPT, GUEST_ARGS[], SYSTEMD, HERE, die(), log()
# Out: $WORKDIR/initramfs.cpio

make_skeleton() {
    local d
    # Mirror the host's /usr-merge layout so library paths printed by ldd are
    # valid in the guest as they are.
    for d in bin sbin lib lib64; do
        if [ -L "/$d" ]; then
            mkdir -p "$ROOT/usr/$d"; ln -s "usr/$d" "$ROOT/$d"
        else
            mkdir -p "$ROOT/$d"
        fi
    done
    mkdir -p "$ROOT"/{dev,proc,sys,tmp,run,etc,mnt,root,var,vmtest/bb,vmtest/out} \
             "$ROOT"/usr/{bin,sbin,lib}
    ln -s ../run "$ROOT/var/run"
    mkdir -p "$ROOT/var/tmp"   # a real directory: PrivateTmp= mounts over it
    # Without /dev/console in the cpio the kernel gives init no console.
    mknod -m 600 "$ROOT/dev/console" c 5 1 2>/dev/null || true
    mknod -m 666 "$ROOT/dev/null" c 1 3 2>/dev/null || true
    cp "$BUSYBOX" "$ROOT/vmtest/bb/busybox"   # applet links are made by /init
    echo 'root:x:0:0:root:/root:/bin/sh' > "$ROOT/etc/passwd"
    echo 'root:x:0:' > "$ROOT/etc/group"
}

declare -A COPIED=()
copy_file() {  # copy_file SRC DST [nolibs]  (content of SRC, dereferenced, at ROOT/DST)
    local src=$1 dst=$2
    [ -n "${COPIED[$dst]:-}" ] && return 0
    COPIED[$dst]=1
    mkdir -p "$ROOT$(dirname "$dst")"
    cp -L --preserve=mode "$src" "$ROOT$dst"
    # ldd already lists a binary's whole dependency closure, so the libraries
    # it names need no ldd of their own.
    if [ -z "${3:-}" ] && is_elf "$src"; then copy_libs "$src"; fi
}
copy_libs() {
    local out line lib
    out=$(ldd "$1" 2>/dev/null) || return 0   # static binaries: nothing to do
    while IFS= read -r line; do
        case $line in
        *"not found"*) die "$1: missing library: $line";;
        *"=> /"*) lib=${line#*=> }; lib=${lib%% (*};;
        [[:space:]]/*) lib=${line#"${line%%[![:space:]]*}"}; lib=${lib%% (*};;
        *) continue;;
        esac
        copy_file "$lib" "$lib" nolibs
    done <<<"$out"
}
copy_path() {  # copy_path SRC DST (file or directory tree)
    local src=$1 dst=$2 f rel
    if [ -d "$src" ]; then
        while IFS= read -r -d '' f; do
            rel=${f#"$src"}
            if [ -L "$f" ] && [ ! -e "$f" ]; then continue; fi
            copy_file "$f" "$dst$rel"
        done < <(find "$src" \( -type f -o -type l \) -print0)
    elif [ -e "$src" ]; then
        copy_file "$src" "$dst"
    else
        die "--include: not found: $src"
    fi
}

decompress_to() {  # decompress_to SRC DST: modules are stored uncompressed
    case $1 in
    *.xz) xz -dc "$1" > "$2" 2>/dev/null || "$BUSYBOX" unxz -c "$1" > "$2";;
    *.zst) zstd -qdc "$1" > "$2";;
    *.gz) gzip -dc "$1" > "$2";;
    *) cp "$1" "$2";;
    esac
}

# The asked modules plus everything modules.dep says they need, and a
# modules.dep for exactly this set (so modprobe and kernel autoload work).
copy_modules() {
    local mdst=/lib/modules/$KVER m key line rel out f
    mkdir -p "$ROOT$mdst"
    for f in modules.builtin modules.builtin.modinfo modules.order; do
        [ -f "$MODDIR/$f" ] && cp "$MODDIR/$f" "$ROOT$mdst/"
    done
    for m in "${MODULES[@]}"; do
        key=${m//-/_}
        line=$(awk -F: -v k="$key" '{ n=$1; sub(/.*\//,"",n); sub(/\.ko(\.[a-z]+)?$/,"",n);
                gsub(/-/,"_",n); if (n==k) { print; exit } }' "$MODDIR/modules.dep")
        if [ -z "$line" ]; then
            if grep -Eq "/(${key}|${m})\.ko" "$MODDIR/modules.builtin" 2>/dev/null; then
                continue
            fi
            die "module $m not found in $MODDIR/modules.dep"
        fi
        for rel in ${line/:/ }; do
            out=$ROOT$mdst/${rel%.ko*}.ko
            [ -e "$out" ] && continue
            mkdir -p "$(dirname "$out")"
            decompress_to "$MODDIR/$rel" "$out" || die "cannot copy module $rel"
        done
    done
    "$BUSYBOX" depmod -b "$ROOT" "$KVER" || die "depmod for the initramfs failed"
}

shq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

# Guest script, its arguments and environment, shell-quoted for busybox sh.
write_guest_files() {
    local a e k v
    cp "$GUEST_SCRIPT" "$ROOT/vmtest/guest.sh"
    cp "$HERE/guest-lib.sh" "$ROOT/vmtest/lib.sh"
    {
        printf 'set --'
        for a in "${GUEST_ARGS[@]+"${GUEST_ARGS[@]}"}"; do printf ' %s' "$(shq "$a")"; done
        printf '\n'
        for e in "${ENVS[@]+"${ENVS[@]}"}"; do
            k=${e%%=*}; v=${e#*=}
            [[ $k =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || die "bad --env name: $k"
            printf 'export %s=%s\n' "$k" "$(shq "$v")"
        done
    } > "$ROOT/vmtest/args.sh"
    cp "$HERE/lib/guest-init.sh" "$ROOT/init"
    chmod 755 "$ROOT/init" "$ROOT/vmtest/guest.sh"
}

build_initramfs() {
    local inc src dst
    rm -rf "$ROOT" "$WORKDIR/initramfs.cpio"
    mkdir -p "$ROOT"
    make_skeleton
    for inc in "${INCLUDES[@]+"${INCLUDES[@]}"}"; do
        src=${inc%%:*}; dst=${inc#*:}
        [[ $dst == /* ]] || die "include destination must be absolute: $dst"
        copy_path "$src" "$dst"
    done
    # /bin/sh and /sbin/modprobe from busybox unless real ones were included.
    [ -e "$ROOT/bin/sh" ] || ln -s /vmtest/bb/busybox "$ROOT/bin/sh"
    for a in modprobe insmod rmmod lsmod; do
        [ -e "$ROOT/sbin/$a" ] || ln -s /vmtest/bb/busybox "$ROOT/sbin/$a"
    done
    [ ${#MODULES[@]} -gt 0 ] && copy_modules
    [ "$SYSTEMD" = 1 ] && add_systemd_guest
    printf '%s\n' /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib /usr/lib \
        /usr/local/lib > "$ROOT/etc/ld.so.conf"
    ldconfig -r "$ROOT" 2>/dev/null || log "warning: ldconfig -r failed (continuing)"
    write_guest_files
    (cd "$ROOT" && find . -mindepth 1 | LC_ALL=C sort |
        "$BUSYBOX" cpio -o -H newc 2>/dev/null) > "$WORKDIR/initramfs.cpio"
}
