#!/bin/sh
# make-test-tree.sh DEB PATCH OUT: a kernel git tree to bisect, made from Debian's
# linux-source-6.1 package DEB (the one the source-built suites use), at OUT (replaced).
#
# There is no kernel git history offline, so this makes one: a base commit holding the
# package's tree with PATCH applied (images/kernels/patches/sunrpc-no-rto-carryover.patch: RPC
# retransmit timeouts without carry-over, the fast client), then five small commits,
# one of which reverts PATCH (the slow client of suites/nfs-udp-rto-carryover.yaml):
#
#   base      the tree + PATCH                                (tag: base)
#   1         Documentation: a sentence in the NFS docs       (no object changes)
#   2         NFS: a comment in fs/nfs/read.c                  (rebuilds one file, same code)
#   3         SUNRPC: carry the RTO over (reverts PATCH)       the culprit
#   4         a comment in a wireless driver outside the config (builds nothing)
#   5         MAINTAINERS: a line                              (tag: bad)
#
# Dates and authors are fixed, so the commit ids are the same on every machine for
# the same DEB and PATCH.
set -eu
deb=$1 patch=$2 out=$3
case "$patch" in /*) ;; *) patch=$PWD/$patch ;; esac
rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards './usr/src/linux-source-*.tar.xz'
tar -xf "$tmp"/usr/src/linux-source-*.tar.xz -C "$tmp"
src=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d -name 'linux-source-*' | head -n 1)
[ -n "$src" ] || { echo "make-test-tree: no linux-source-* folder in $deb" >&2; exit 1; }
# Move the tree's entries (dot files too) into OUT.
find "$src" -mindepth 1 -maxdepth 1 -exec mv {} "$out"/ \;
cd "$out"
git init -q -b master .
git config user.name "vmrepro test tree"
git config user.email "tree@vmrepro.invalid"
git config core.compression 1
n=0
commit() {
  n=$((n + 1))
  GIT_AUTHOR_DATE="2026-01-01T0$n:00:00Z" GIT_COMMITTER_DATE="2026-01-01T0$n:00:00Z" git commit -q -a -m "$1" -m "$2"
}
patch -s -p1 < "$patch"
# -f: Debian's top-level .gitignore ignores everything at the top ("/*").
git add -A -f .
GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" \
  git commit -q -m "Linux 6.1 from Debian's linux-source-6.1, RPC timeouts without carry-over" \
  -m "The base of vmrepro's bisect test: the package's tree with $(basename "$patch") applied."
git tag base
printf '\nvmrepro test tree: this sentence changes nothing that is built.\n' >> Documentation/filesystems/nfs/nfs41-server.rst
commit "Documentation: nfs: a note on the test tree" "Changes no built file."
sed -i '0,/^#include/s//\/* vmrepro test tree: a comment only. *\/\n#include/' fs/nfs/read.c
commit "NFS: a comment in read.c" "Rebuilds fs/nfs/read.o with the same code."
patch -s -R -p1 < "$patch"
commit "SUNRPC: carry earlier requests' retransmissions into a new request's RTO" \
  "Reverts the base's $(basename "$patch"): the first timeout of a request is shifted left by rpc_ntimeo() again."
printf '/* vmrepro test tree: a comment in a driver outside the guest config. */\n' >> drivers/net/wireless/ti/wl1251/main.c
commit "wl1251: a comment" "CONFIG_WL1251 is off in the guest config: nothing is built."
printf '\n# vmrepro test tree\n' >> MAINTAINERS
commit "MAINTAINERS: a line" "Changes no built file."
git tag bad
git log --oneline
