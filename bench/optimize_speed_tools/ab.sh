#!/usr/bin/env bash
# ab.sh N graph binA binB ...: alternating runs, RAYON_NUM_THREADS=1, prints user/sys/wall and the --timings steps
n=$1; g=$2; shift 2
for i in $(seq $n); do for b in "$@"; do
  l=$(cut -d' ' -f1 /proc/loadavg)
  RAYON_NUM_THREADS=1 /usr/bin/time -f "%U %S %e" -o /tmp/cov23i.t $b optimize $g --timings > /tmp/cov23i.o 2>&1
  k=$(grep -E "phase kernels|pricing|extraction|^  load|total" /tmp/cov23i.o | awk '{printf "%s=%s ", $(NF-3)$(NF-2), $(NF-1)}')
  echo "$(basename $b) load=$l $(cat /tmp/cov23i.t | awk '{printf "user=%s sys=%s wall=%s", $1,$2,$3}') $k"
done; done
