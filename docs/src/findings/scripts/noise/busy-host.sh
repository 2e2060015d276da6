#!/bin/bash
# docs/src/findings/scripts/noise/aa-noise.sh on a busy host: one CPU-bound shell loop per host CPU, at nice
# 10, for as long as the A/A runs last (a stand-in for the compilers and kernel builds
# that shared the host in the first pinning measurement). Run from the repository root:
#   docs/src/findings/scripts/noise/busy-host.sh OUT REPS SETTING...      e.g. busy-host.sh results/busy 3 default flag
set -u
pids=()
for _ in $(seq 1 "$(nproc)"); do
  nice -n 10 sh -c 'while :; do :; done' &
  pids+=($!)
done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
"$(dirname "$0")/aa-noise.sh" "$@"
