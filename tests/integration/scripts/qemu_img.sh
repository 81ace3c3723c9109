#!/bin/bash
# qemu-img convert of a random image into the export and back, byte-compared,
# on the RAM and the file export.
set -euo pipefail
command -v qemu-img >/dev/null || { echo "SKIP: qemu-img not installed"; exit 77; }

src="$NBD_TMPDIR/src.img"
head -c $((24 << 20)) /dev/urandom > "$src"
# A hole in the middle: convert may skip it, and the export must read zeros.
dd if=/dev/zero of="$src" bs=1M seek=8 count=4 conv=notrunc status=none
for uri in "$NBD_URI" "$NBD_URI_FILE"; do
    echo "== $uri"
    qemu-img convert -n -f raw -O raw "$src" "$uri"
    qemu-img convert -f raw -O raw "$uri" "$NBD_TMPDIR/back.img"
    cmp -n $((24 << 20)) "$src" "$NBD_TMPDIR/back.img"
    # The export is larger than the image; its tail reads as zeros, which
    # qemu-img compare (non-strict) accepts as identical.
    qemu-img compare -f raw -F raw "$src" "$uri"
    rm -f "$NBD_TMPDIR/back.img"
done
