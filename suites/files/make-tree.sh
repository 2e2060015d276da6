#!/bin/sh
# make-tree DIR FOLDERS FILES BYTES: a fresh tree at DIR of FOLDERS folders holding FILES
# files of BYTES random bytes each (d0/x0000 … d19/x0099 for 20 folders of 100 files).
# One `split` per folder, so building 2,000 files costs 20 processes, not 2,000.
set -eu
dir=$1 folders=$2 files=$3 bytes=$4
rm -rf "$dir"
mkdir -p "$dir"
d=0
while [ "$d" -lt "$folders" ]; do
  mkdir "$dir/d$d"
  head -c $((files * bytes)) /dev/urandom | split -a 4 -d -b "$bytes" - "$dir/d$d/x"
  d=$((d + 1))
done
echo "$(find "$dir" -type f | wc -l) files of $bytes bytes in $folders folders at $dir"
