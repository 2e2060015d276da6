#!/bin/bash
# A/A noise under TCG: suites/nfs-aa-same-kernel.yaml run REPS times per setting,
# interleaved. Settings: default (plain QEMU), pin (each QEMU pinned by the
# docs/src/findings/scripts/noise/qemu-pin wrapper), icount (-icount shift=auto, docs/src/findings/scripts/noise/qemu-icount),
# flag (vmrepro run --pin, the built-in pinning). Run from the repository root:
#   docs/src/findings/scripts/noise/aa-noise.sh [OUT] [REPS] [SETTING...]
#       (defaults: results/noise, 5, "default pin icount")
# then: python3 docs/src/findings/scripts/noise/analyse.py OUT
set -u
B=${VMREPRO:-target/debug/vmrepro}
S=suites/nfs-aa-same-kernel.yaml
OUT=${1:-results/noise}
REPS=${2:-5}
shift $(( $# < 2 ? $# : 2 ))
CONDS=${*:-default pin icount}
mkdir -p "$OUT"
for rep in $(seq 1 "$REPS"); do
  for cond in $CONDS; do
    q=qemu-system-x86_64; extra=
    case $cond in
      default) ;;
      pin) q=$PWD/docs/src/findings/scripts/noise/qemu-pin ;;
      icount) q=$PWD/docs/src/findings/scripts/noise/qemu-icount ;;
      flag) extra=--pin ;;
      *) echo "unknown setting $cond" >&2; exit 2 ;;
    esac
    s=$(date +%s.%N)
    VMREPRO_QEMU=$q $B run $S $extra --results "$OUT/$cond" > "$OUT/log.$cond.$rep" 2>&1
    rc=$?
    e=$(date +%s.%N)
    echo "$rep $cond rc=$rc wall=$(echo "$e - $s" | bc)" >> "$OUT/summary.txt"
  done
done
