#!/usr/bin/env bash
# The cold-time saving of the host-wide kernel build lock (BENCHMARKS.md, "Kernel
# builds one at a time"), measured in one run: the two source kernels of `cargo test`
# (nfs-read-udp-loss's unpatched 6.1 and nfs-udp-rto-carryover's patched one) built
# at the same time from nothing, twice:
#   lock     both into ONE empty cache: the lock makes the second wait, then it reuses
#            the first one's ccache objects (what `cargo test` does now);
#   no-lock  each into its OWN empty cache: two locks, two ccaches, so they compile
#            side by side on the host's cores (what it did before the lock).
# Each cache is seeded with the rootfs and the downloaded .debs from CACHE so only the
# kernels are built. Usage: docs/src/findings/scripts/build-lock/measure.sh OUT [CACHE]
set -euo pipefail
out=${1:?usage: measure.sh OUT [CACHE]}
seed=${2:-$HOME/.cache/vmrepro}
repo=$(cd "$(dirname "$0")/../.." && pwd)
vmrepro=${VMREPRO:-$repo/target/debug/vmrepro}
mkdir -p "$out/suites"
cp "$repo/images/kernels/nfs-udp-guest.config" "$repo/images/kernels/patches/sunrpc-no-rto-carryover.patch" "$out/suites/"
suite() { # NAME PATCHES
  cat > "$out/suites/$1.yaml" <<YAML
name: build-$1
network: { subnet: 10.99.0.0/24 }
vms:
  - name: only
    kernel:
      source:
        debian: "6.1"
        fragments: [nfs-udp-guest.config]
        patches: [$2]
    address: 10.99.0.10
YAML
}
suite unpatched ""
suite patched sunrpc-no-rto-carryover.patch
fresh() { # DIR
  rm -rf "$1" && mkdir -p "$1" && cp -a "$seed/rootfs" "$seed/debs" "$1/"
}
build() { # CACHE SUITE LOG
  local t0=$(date +%s.%N)
  "$vmrepro" --images "$repo/images" --cache "$1" images build "$out/suites/$2.yaml" > "$3" 2>&1
  echo "$2 $(echo "$(date +%s.%N) - $t0" | bc)" >> "$out/times.txt"
}
: > "$out/times.txt"
for mode in lock no-lock; do
  if [ "$mode" = lock ]; then a=$out/cache-lock; b=$a; fresh "$a"
  else a=$out/cache-u; b=$out/cache-p; fresh "$a"; fresh "$b"; fi
  echo "== $mode" >> "$out/times.txt"
  t0=$(date +%s.%N)
  build "$a" unpatched "$out/$mode-unpatched.log" &
  build "$b" patched "$out/$mode-patched.log" &
  wait
  echo "wall $(echo "$(date +%s.%N) - $t0" | bc)" >> "$out/times.txt"
  rm -rf "$out"/cache-*
done
cat "$out/times.txt"
