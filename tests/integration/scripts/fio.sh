#!/bin/bash
# fio with the nbd engine, random read/write with crc32c verification, short
# runs on the RAM export and on the file export.
set -euo pipefail
command -v fio >/dev/null || { echo "SKIP: fio not installed"; exit 77; }
fio --enghelp 2>/dev/null | grep -qw nbd || { echo "SKIP: fio lacks the nbd engine"; exit 77; }

# fio saves verify state files into its working directory: keep them out of the tree.
cd "$NBD_TMPDIR"
for uri in "$NBD_URI" "$NBD_URI_FILE"; do
    echo "== $uri"
    fio --name=verify --ioengine=nbd --uri="$uri" --rw=randrw --bs=4k --bsrange=512-64k \
        --size=64M --iodepth=16 --numjobs=1 --verify=crc32c --verify_fatal=1 --verify_state_save=0 \
        --runtime=4 --output-format=terse --terse-version=3 \
        > "$NBD_TMPDIR/fio.out" 2>&1 || { cat "$NBD_TMPDIR/fio.out"; echo "FAIL: fio"; exit 1; }
    # terse v3: field 5 is the error code.
    err=$(grep '^3;' "$NBD_TMPDIR/fio.out" | cut -d';' -f5)
    cat "$NBD_TMPDIR/fio.out" | head -c 600; echo
    [ "$err" = "0" ] || { echo "FAIL: fio error $err"; exit 1; }
done
