#!/bin/bash
# System calls, context switches and CPU per request on both sides of one fio
# job: the server (perf stat attached to it) and fio (its nbd engine, libnbd).
# perf's tracepoints cost little, so the job runs at its own pace, unlike
# under strace (bench/syscall_count.sh): the batching a change brings shows.
# Usage: bench/syscalls_per_request.sh SERVER unix|tcp RW BS IODEPTH [SECONDS] [extra top-level yaml]
#   SERVER: an nbdsched binary, nbdkit (16 threads) or nbdkit-t1 (--threads 1)
#   bench/syscalls_per_request.sh build-rel/daemon/nbdsched unix randread 4k 64 3 'limits: {coalesce: 0}'
set -euo pipefail
srv=$1 tr=$2 rw=$3 bs=$4 qd=$5 secs=${6:-3} extra=${7:-}
d=$(mktemp -d /tmp/nbdsched-spr.XXXX)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf $d' EXIT
port=$((20000 + RANDOM % 20000))
if [ "$tr" = unix ]; then uri="nbd+unix:///x?socket=$d/s.sock"; else uri="nbd://127.0.0.1:$port/x"; fi
case $srv in
  nbdkit|nbdkit-t1)
    threads=(); [ "$srv" = nbdkit-t1 ] && threads=(--threads 1)
    if [ "$tr" = unix ]; then at=(-U "$d/s.sock"); else at=(-i 127.0.0.1 -p "$port"); fi
    nbdkit -f "${at[@]}" "${threads[@]}" memory 1G & pid=$! ;;
  *)
    if [ "$tr" = unix ]; then listen="[{unix: $d/s.sock}]"; else listen="[{tcp: \"127.0.0.1:$port\"}]"; fi
    printf 'listen: %s\ndevices: [{name: d, backend: ram, size: 1GiB}]\nexports: [{name: x, device: d}]\nlog_level: info\n%s\n' \
      "$listen" "$extra" > "$d/c.yaml"
    "$srv" --config "$d/c.yaml" 2> "$d/log" & pid=$! ;;
esac
sleep 0.7
fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1m --iodepth=8 --size=1g --thread > /dev/null
events=context-switches,task-clock,raw_syscalls:sys_enter
for s in recvfrom recvmsg sendmsg sendto epoll_wait poll read write nanosleep clock_nanosleep; do events+=,syscalls:sys_enter_$s; done
perf stat -x, -e "$events" -p $pid -o "$d/server.stat" & sp=$!
sleep 0.2
perf stat -x, -e "$events" -o "$d/fio.stat" -- fio --name=job --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" \
  --iodepth="$qd" --runtime="$secs" --time_based --thread --output-format=json > "$d/fio.json"
kill -INT $sp; wait $sp 2>/dev/null || true
kill -INT $pid; wait $pid 2>/dev/null || true
/usr/bin/python3 - "$d" <<'PY'
import json, sys
d = sys.argv[1]
text = open(d + "/fio.json").read()
job = json.loads(text[text.index("{"):])["jobs"][0]
ios = job["read"]["total_ios"] + job["write"]["total_ios"]
print(f"requests {ios}, IOPS {job['read']['iops'] + job['write']['iops']:.0f}")
for side in ("server", "fio"):
    counts = {}
    for line in open(f"{d}/{side}.stat"):
        f = line.strip().split(",")
        if len(f) > 3 and f[0][:1].isdigit():
            counts[f[2].replace("syscalls:sys_enter_", "").replace("raw_syscalls:sys_enter", "syscalls")] = float(f[0])
    cpu = counts.pop("task-clock", 0) * 1000 / ios   # msec -> us per request
    print(f"  {side}: CPU {cpu:.1f} us/request; per request: " +
          " ".join(f"{k} {v / ios:.2f}" for k, v in counts.items() if v > 0))
PY
grep -h "event loop:" "$d/log" 2>/dev/null || true
