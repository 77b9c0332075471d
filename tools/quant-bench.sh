#!/bin/sh
# quant-bench.sh [TYPE...]: build tools/quant-bench.c against lib/libmemra.a,
# run it on one core, and append its rows as receipts to
# bench/YYYY-MM-DD/YYYY-MM-DD-quant-cpu.tsv with the raw log beside it
# (columns as DESIGN.md: date commit gpu binary model quant scenario ctx n
# median min max unit peer peer_median ratio log; gpu holds the CPU model,
# ctx the row length k).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
make -s CUDA=0 lib/libmemra.a
mkdir -p build/tools
${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Ilib -o build/tools/quant-bench tools/quant-bench.c lib/libmemra.a -lm -pthread
day=$(date -u +%Y-%m-%d)
mkdir -p "bench/$day"
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- lib || echo -dirty)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1 | tr '\t' ' ')
tsv=bench/$day/$day-quant-cpu.tsv
log=$day-quant-cpu-$commit.log
[ -f "$tsv" ] || printf 'date\tcommit\tgpu\tbinary\tmodel\tquant\tscenario\tctx\tn\tmedian\tmin\tmax\tunit\tpeer\tpeer_median\tratio\tlog\n' >"$tsv"
pin=
command -v taskset >/dev/null 2>&1 && pin="taskset -c 0"
{ echo "# $(date -u +%FT%TZ) commit $commit cpu '$cpu' nproc $(nproc) load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# $pin build/tools/quant-bench $*"
  $pin build/tools/quant-bench "$@" 2>&1; } | tee "bench/$day/$log" |
    awk -F'\t' -v d="$day" -v c="$commit" -v g="$cpu" -v l="$log" '
	!/^#/ && NF == 8 { printf "%s\t%s\t%s\tquant-bench\t-\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t-\t-\t-\t%s\n",
	    d, c, g, $1, $2, $3, $4, $5, $6, $7, $8, l }' >>"$tsv"
echo "receipts: $tsv (log bench/$day/$log)"
