#!/bin/bash
# Detection power and false alarms of the verdict rules, on the same data (issue 29;
# BENCHMARKS.md, "Verdict power and false alarms"). Run from the repository root:
#   docs/src/findings/scripts/verdict-power/power.sh [OUT] [REPS] [LEVELS] [SETTINGS]
#       (defaults: results/power, 5, "5 10 20 50", "default")
# then: cargo run --example verdict_power -- OUT
#
# 1. Calibration: CAL runs (default 2) of power.yaml.in with a 10 Gbit/s "limit" (none in
#    effect) give the clients' payload throughput N (MB/s, median of client-a's and
#    client-aa's medians).
# 2. Each level x (a slowdown in percent) gets the rate N * 8 / (1 + x/100) / 0.95 Mbit/s
#    (0.95: the share of payload in the IP packets of 8 KiB NFS READ replies over TCP).
# 3. REPS rounds; in each, every level runs once under every setting, interleaved
#    (settings: default, pin = vmrepro run --pin). Every run also compares client-aa,
#    an A/A copy of the baseline.
set -u
B=${VMREPRO:-target/debug/vmrepro}
HERE=docs/src/findings/scripts/verdict-power
OUT=${1:-results/power}
REPS=${2:-5}
LEVELS=${3:-5 10 20 50}
SETTINGS=${4:-default}
CAL=${CAL:-2}
export VMREPRO_IMAGES=$PWD/images
mkdir -p "$OUT/suites"
suite() { # rate → suite file
  local f="$OUT/suites/power-$1.yaml"
  sed "s/@RATE@/$1/g" "$HERE/power.yaml.in" > "$f"
  echo "$f"
}
run() { # setting level suite
  local extra= s e rc
  [ "$1" = pin ] && extra=--pin
  s=$(date +%s.%N)
  $B run "$3" $extra --results "$OUT/$1/$2" > "$OUT/log.$1.$2.$(date +%s)" 2>&1
  rc=$?
  e=$(date +%s.%N)
  echo "$(date -u +%FT%TZ) $1 $2 rc=$rc wall=$(echo "$e - $s" | bc)" >> "$OUT/summary.txt"
}
if [ ! -s "$OUT/throughput" ]; then
  f=$(suite 10gbit)
  for i in $(seq 1 "$CAL"); do run default cal "$f"; done
  python3 - "$OUT" > "$OUT/throughput" <<'PY'
import json, pathlib, statistics, sys
mb = []
for p in pathlib.Path(sys.argv[1], "default", "cal").glob("*/*/results.json"):
    for v in json.loads(p.read_text())["measurements"][0]["vms"]:
        if v["vm"] in ("client-a", "client-aa") and v.get("median_mb_s"):
            mb.append(v["median_mb_s"])
if not mb:
    sys.exit("calibration: no throughput in " + sys.argv[1])
print(f"{statistics.median(mb):.3f}")
PY
  [ -s "$OUT/throughput" ] || exit 1
fi
N=$(cat "$OUT/throughput")
echo "payload throughput without a limit: $N MB/s" | tee -a "$OUT/summary.txt"
declare -A RATE
for x in $LEVELS; do
  RATE[$x]=$(python3 -c "print(f'{$N * 8 / (1 + $x / 100) / 0.95:.0f}mbit')")
  echo "$x % → ${RATE[$x]}" | tee -a "$OUT/summary.txt"
  echo "${RATE[$x]}" > "$OUT/rate.$x"
done
for rep in $(seq 1 "$REPS"); do
  for x in $LEVELS; do
    for setting in $SETTINGS; do
      run "$setting" "$x" "$(suite "${RATE[$x]}")"
    done
  done
done
