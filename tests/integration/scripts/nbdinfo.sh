#!/bin/bash
# nbdinfo --json on one export and --list on all, checked with python's json.
set -euo pipefail
command -v nbdinfo >/dev/null || { echo "SKIP: nbdinfo not installed"; exit 77; }

nbdinfo --json "$NBD_URI" > "$NBD_TMPDIR/info.json"
nbdinfo --json "$NBD_URI_RO" > "$NBD_TMPDIR/info-ro.json"
nbdinfo --list --json "nbd+unix://?socket=$NBD_SOCKET" > "$NBD_TMPDIR/list.json"
nbdinfo --list "nbd+unix://?socket=$NBD_SOCKET" > "$NBD_TMPDIR/list.txt"

if [ "$NBD_TCP_PORT" != 0 ]; then
    size=$(nbdinfo --size "nbd://127.0.0.1:$NBD_TCP_PORT/default")
    [ "$size" = $((128 << 20)) ] || { echo "FAIL: nbdinfo over TCP: size '$size'"; exit 1; }
    echo "ok   nbdinfo --size over TCP"
fi

/usr/bin/python3 - "$NBD_TMPDIR" "$ITEST_SERVER" <<'PY'
import json, os, sys
folder, server = sys.argv[1], sys.argv[2]
failures = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)

info = json.load(open(os.path.join(folder, "info.json")))
check(info["protocol"] == "newstyle-fixed", "protocol is newstyle-fixed")
check(len(info["exports"]) == 1, "one export in --json")
e = info["exports"][0]
check(e["export-name"] == "default", "export name is default")
check(e["export-size"] == 128 << 20, "export-size is 128 MiB")
for flag in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn"):
    check(e[flag] is True, flag + " is true")
check(e["is_read_only"] is False, "default is not read-only")
check(e["is_rotational"] is False, "RAM is not rotational")
if server == "nbdsched":
    check(e.get("description") == "RAM export", "description is 'RAM export'")
    check(e.get("block_size_maximum") == 32 << 20, "block_size_maximum is 32 MiB")

ro = json.load(open(os.path.join(folder, "info-ro.json")))["exports"][0]
check(ro["is_read_only"] is True, "ro is read-only")

listed = json.load(open(os.path.join(folder, "list.json")))["exports"]
if server == "nbdsched":
    names = sorted(x["export-name"] for x in listed)
    check(names == ["default", "file", "ro"], "--list shows default, file, ro (got %s)" % names)
    sizes = {x["export-name"]: x["export-size"] for x in listed}
    check(sizes.get("file") == 64 << 20, "file export is 64 MiB")
text = open(os.path.join(folder, "list.txt")).read()
check("export-size" in text, "plain --list prints export sizes")
sys.exit(1 if failures else 0)
PY
