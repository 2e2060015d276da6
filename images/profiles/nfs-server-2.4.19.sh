#!/bin/sh
# Guest profile "nfs-server-2.4.19" — run in the server VM once its guest agent answers.
# The runner passes every parameter explicitly (images/profiles/nfs-server-2.4.19.yaml
# has the defaults below, the suite may override them; both are recorded):
#
#   VMREPRO_EXPORTS       one export per line: "<path> <exports(5) options>"
#   VMREPRO_NFS_VERSIONS  versions to serve: "2 3" (2 where the kernel still has it)
#   VMREPRO_NFSD_THREADS  nfsd threads (8)
#   VMREPRO_BLOCK_SIZE    /proc/fs/nfsd/max_block_size in bytes (8192)
#   VMREPRO_UDP           "yes" to serve UDP as well as TCP (yes)
#
# This is a MODERN kernel (whatever the suite boots, e.g. Debian 6.1) and today's
# nfs-utils, configured to behave like the report's file server of 2003, a Linux
# 2.4.19 kernel. It is not a 2.4.19 kernel. What is reproduced with the defaults (the
# "2.4.19-style server" of docs/src/server-profiles.md gives the source of each number):
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
: "${VMREPRO_EXPORTS:?no export given}" "${VMREPRO_NFS_VERSIONS:?}" "${VMREPRO_NFSD_THREADS:?}" "${VMREPRO_BLOCK_SIZE:?}"
UDP=${VMREPRO_UDP:-yes}

# Reassembly limits: lower the low mark first (the kernel requires low <= high).
echo 196608 > /proc/sys/net/ipv4/ipfrag_low_thresh
echo 262144 > /proc/sys/net/ipv4/ipfrag_high_thresh
echo 30 > /proc/sys/net/ipv4/ipfrag_time

: > /etc/exports
printf '%s\n' "$VMREPRO_EXPORTS" | while read -r path options; do
  [ -n "$path" ] || continue
  mkdir -p "$path"
  echo "$path *($options)" >> /etc/exports
done

modprobe nfsd
mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd
pidof rpcbind >/dev/null || rpcbind
rpc.statd --no-notify 2>/dev/null || true
exportfs -ra

# Block size must be set before any nfsd thread runs.
echo "$VMREPRO_BLOCK_SIZE" > /proc/fs/nfsd/max_block_size
transports="--tcp"
[ "$UDP" = yes ] && transports="--udp --tcp"
v3="--no-nfs-version 3"
case " $VMREPRO_NFS_VERSIONS " in *" 3 "*) v3="--nfs-version 3" ;; esac
# shellcheck disable=SC2086 # word splitting of the flag lists is intended
case " $VMREPRO_NFS_VERSIONS " in
  *" 2 "*)
    if rpc.nfsd --nfs-version 2 $v3 --no-nfs-version 4 $transports "$VMREPRO_NFSD_THREADS" 2>/dev/null; then
      :
    else
      # Fall back to what else was asked for; with NFSv2 alone that is nothing, and
      # nfsd with every version off would serve no client: fail instead.
      case " $VMREPRO_NFS_VERSIONS " in
        *" 3 "*) ;;
        *) echo "nfs-server-2.4.19: this kernel has no NFSv2 server (CONFIG_NFSD_V2) and NFSv3 was not asked for; nothing to serve" >&2
           exit 1 ;;
      esac
      echo "nfs-server-2.4.19: this kernel has no NFSv2 server (CONFIG_NFSD_V2); serving NFSv3 only"
      rpc.nfsd 0 2>/dev/null || true
      rpc.nfsd $v3 --no-nfs-version 4 $transports "$VMREPRO_NFSD_THREADS"
    fi
    ;;
  *) rpc.nfsd $v3 --no-nfs-version 4 $transports "$VMREPRO_NFSD_THREADS" ;;
esac
rpc.mountd --no-nfs-version 4

echo "kernel: $(uname -r)"
echo "nfsd versions: $(cat /proc/fs/nfsd/versions)"
echo "nfsd threads: $(cat /proc/fs/nfsd/threads)"
echo "nfsd max_block_size: $(cat /proc/fs/nfsd/max_block_size)"
echo "nfsd ports: $(cat /proc/fs/nfsd/portlist | tr '\n' ' ')"
echo "ipfrag_high_thresh: $(cat /proc/sys/net/ipv4/ipfrag_high_thresh)"
echo "ipfrag_low_thresh: $(cat /proc/sys/net/ipv4/ipfrag_low_thresh)"
echo "ipfrag_time: $(cat /proc/sys/net/ipv4/ipfrag_time)"
