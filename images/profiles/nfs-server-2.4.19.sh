#!/bin/sh
# Guest profile "nfs-server-2.4.19" — run in the server VM once its guest agent answers,
# with the export path as $1 (the suite's nfs_read.export).
#
# This is a MODERN kernel (whatever the suite boots, e.g. Debian 6.1) and today's
# nfs-utils, configured to behave like the report's file server of 2003, a Linux
# 2.4.19 kernel. It is not a 2.4.19 kernel. What is reproduced (see
# images/profiles/nfs-server-2.4.19.md for the sources of each number):
#   - NFS versions 2 and 3 only, no NFSv4 (2.4.19 had none). NFSv2 only where the
#     kernel still has it (CONFIG_NFSD_V2; Debian's 5.10 does, 6.1 and later don't):
#     the versions actually enabled are printed and recorded.
#   - UDP and TCP transports both enabled (2.4's default transport was UDP).
#   - 8 nfsd threads (RPCNFSDCOUNT=8, the era's default).
#   - Maximum NFS block size 8192 bytes (2.4's NFSSVC_MAXBLKSIZE), so clients
#     negotiate rsize/wsize 8192 as they did against that server.
#   - IP reassembly limits of 2.4: ipfrag_high_thresh 262144, ipfrag_low_thresh
#     196608, ipfrag_time 30 s.
set -eu
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
EXPORT=${1:-/srv/export}

# Reassembly limits: lower the low mark first (the kernel requires low <= high).
echo 196608 > /proc/sys/net/ipv4/ipfrag_low_thresh
echo 262144 > /proc/sys/net/ipv4/ipfrag_high_thresh
echo 30 > /proc/sys/net/ipv4/ipfrag_time

mkdir -p "$EXPORT"
echo "$EXPORT *(rw,sync,no_subtree_check,no_root_squash,insecure)" > /etc/exports

modprobe nfsd
mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
pidof rpcbind >/dev/null || rpcbind
rpc.statd --no-notify 2>/dev/null || true
exportfs -ra

# Block size must be set before any nfsd thread runs.
echo 8192 > /proc/fs/nfsd/max_block_size
if rpc.nfsd --nfs-version 2 --nfs-version 3 --no-nfs-version 4 --udp --tcp 8 2>/dev/null; then
  :
else
  echo "nfs-server-2.4.19: this kernel has no NFSv2 server (CONFIG_NFSD_V2); serving NFSv3 only"
  rpc.nfsd 0 2>/dev/null || true
  rpc.nfsd --nfs-version 3 --no-nfs-version 4 --udp --tcp 8
fi
rpc.mountd --no-nfs-version 4

echo "kernel: $(uname -r)"
echo "nfsd versions: $(cat /proc/fs/nfsd/versions)"
echo "nfsd threads: $(cat /proc/fs/nfsd/threads)"
echo "nfsd max_block_size: $(cat /proc/fs/nfsd/max_block_size)"
echo "nfsd ports: $(cat /proc/fs/nfsd/portlist | tr '\n' ' ')"
echo "ipfrag_high_thresh: $(cat /proc/sys/net/ipv4/ipfrag_high_thresh)"
echo "ipfrag_low_thresh: $(cat /proc/sys/net/ipv4/ipfrag_low_thresh)"
echo "ipfrag_time: $(cat /proc/sys/net/ipv4/ipfrag_time)"
