#!/bin/bash
# Detection power and false alarms of the verdict rules, on the same data (issue 29;
# BENCHMARKS.md, "Verdict power and false alarms"). Run from the repository root:
#   docs/src/findings/scripts/verdict-power/power.sh [OUT] [RUNS] [SETTINGS]
#       (defaults: results/power, 10, "default pin")
# then: cargo run --example verdict_power -- OUT
#
# Each run of power.yaml.in reads a 30 MB file 6 times on each of 7 clients, in turn:
# the baseline client-a, two A/A copies of it, and client-5/10/20/50, whose own
# egress (NFS calls and TCP acknowledgements) is rate-limited with netem to slow their
# reads by about 5, 10, 20 and 50 % (RATES, default 12, 9, 5 and 3.5 Mbit/s: read off
# one calibration run on this machine, where 8, 5, 3 and 2 Mbit/s slowed the median read
# 1.13x, 1.21x, 1.67x and 2.73x; the slowdown each run really got is in the table). The
# runs alternate between the settings (default, pin = vmrepro run --pin).
set -u
B=${VMREPRO:-target/debug/vmrepro}
HERE=docs/src/findings/scripts/verdict-power
OUT=${1:-results/power}
RUNS=${2:-10}
SETTINGS=${3:-default pin}
RATES=${RATES:-5:12mbit 10:9mbit 20:5mbit 50:3500kbit}
export VMREPRO_IMAGES=$PWD/images
mkdir -p "$OUT/suites"
f="$OUT/suites/power.yaml"
cp "$HERE/power.yaml.in" "$f"
for lr in $RATES; do
  sed -i "s/@R${lr%%:*}@/${lr#*:}/g" "$f"
  echo "${lr#*:}" > "$OUT/rate.${lr%%:*}"
done
for i in $(seq 1 "$RUNS"); do
  for setting in $SETTINGS; do
    extra=
    [ "$setting" = pin ] && extra=--pin
    s=$(date +%s.%N)
    $B run "$f" $extra --results "$OUT/$setting" > "$OUT/log.$setting.$i" 2>&1
    rc=$?
    echo "$(date -u +%FT%TZ) $setting run $i rc=$rc wall=$(echo "$(date +%s.%N) - $s" | bc)" >> "$OUT/summary.txt"
  done
done
