#!/bin/bash
# A/A noise under TCG: suites/nfs-aa-same-kernel.yaml with plain QEMU, with each QEMU
# pinned to one host core (qemu-pin), and with -icount shift=auto (qemu-icount), 5 runs
# per setting, interleaved. Run from the repository root:
#   docs/noise/aa-noise.sh [OUT]        (default OUT: results/noise)
# then: python3 docs/noise/analyse.py OUT
set -u
B=${VMREPRO:-target/debug/vmrepro}
S=suites/nfs-aa-same-kernel.yaml
OUT=${1:-results/noise}
mkdir -p "$OUT"
for rep in 1 2 3 4 5; do
  for cond in default pin icount; do
    case $cond in
      default) q=qemu-system-x86_64 ;;
      pin) q=$PWD/docs/noise/qemu-pin ;;
      icount) q=$PWD/docs/noise/qemu-icount ;;
    esac
    s=$(date +%s.%N)
    VMREPRO_QEMU=$q $B run $S --results "$OUT/$cond" > "$OUT/log.$cond.$rep" 2>&1
    rc=$?
    e=$(date +%s.%N)
    echo "$rep $cond rc=$rc wall=$(echo "$e - $s" | bc)" >> "$OUT/summary.txt"
  done
done
