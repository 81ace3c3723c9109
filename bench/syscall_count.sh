#!/bin/bash
# System calls a daemon makes for a fixed fio job (strace -c on the daemon), for
# bench/results/data-path.md: load-independent where throughput on a busy machine is not.
# Usage: bench/syscall_count.sh NBDSCHED unix|tcp RW BS IODEPTH IO_SIZE [extra top-level yaml]
#   bench/syscall_count.sh build-rel/daemon/nbdsched tcp read 1m 8 256m
bin=$1 tr=$2 rw=$3 bs=$4 qd=$5 size=$6 extra=$7
d=$(mktemp -d /tmp/nbdsched-sc.XXXX)
if [ $tr = unix ]; then listen="[{unix: $d/s.sock}]"; uri="nbd+unix:///x?socket=$d/s.sock"; else port=$((20000 + RANDOM % 20000)); listen="[{tcp: \"127.0.0.1:$port\"}]"; uri="nbd://127.0.0.1:$port/x"; fi
cat > $d/c.yaml <<EOC
listen: $listen
devices: [{name: d, backend: ram, size: 1GiB}]
exports: [{name: x, device: d}]
log_level: warn
$extra
EOC
$bin --config $d/c.yaml 2>$d/log & pid=$!
sleep 0.5
fio --name=w --ioengine=nbd --uri=$uri --rw=write --bs=1m --iodepth=8 --size=1g --thread >/dev/null 2>&1
strace -c -f -p $pid -o $d/strace 2>/dev/null & sp=$!
sleep 0.5
fio --name=j --ioengine=nbd --uri=$uri --rw=$rw --bs=$bs --iodepth=$qd --io_size=$size --thread --output-format=json 2>/dev/null | python3 -c "import json,sys;t=sys.stdin.read();d=json.loads(t[t.index('{'):])['jobs'][0];k='read' if 'read' in '$rw' else 'write';print('ios',d[k]['total_ios'],'iops %.0f'%d[k]['iops'])"
kill -INT $sp; wait $sp 2>/dev/null
kill $pid; wait $pid 2>/dev/null
head -12 $d/strace
rm -rf $d
