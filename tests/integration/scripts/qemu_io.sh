#!/bin/bash
# qemu-io writes and reads back patterns through the NBD export.
set -euo pipefail
command -v qemu-io >/dev/null || { echo "SKIP: qemu-io not installed"; exit 77; }

out=$(qemu-io -f raw "$NBD_URI" \
    -c 'write -P 0xab 0 64k' -c 'read -P 0xab 0 64k' \
    -c 'write -P 0x5c 1000001 12345' -c 'read -P 0x5c 1000001 12345' \
    -c 'write -z 4096 8192' -c 'read -P 0 4096 8192' -c 'read -P 0xab 0 4096' \
    -c 'write -f -P 0x11 65536 4096' -c 'read -P 0x11 65536 4096' \
    -c 'flush' 2>&1)
echo "$out"
if grep -qiE 'fail|error' <<<"$out"; then
    echo "FAIL: qemu-io reported a failure"
    exit 1
fi
[ "$(grep -c '^read ' <<<"$out")" -eq 5 ] || { echo "FAIL: expected 5 reads"; exit 1; }
