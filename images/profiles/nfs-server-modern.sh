#!/bin/sh
# Guest profile "nfs-server-modern" — an NFS server with today's defaults: NFSv3 and
# NFSv4.0/4.1/4.2, TCP only, the kernel's own maximum block size (1 MiB on 6.x) and
# reassembly limits. Run in the VM once its guest agent answers; the runner passes
# every parameter explicitly (images/profiles/nfs-server-modern.yaml has the defaults,
# the suite may override them; both are recorded with the results):
#
#   VMREPRO_EXPORTS       one export per line: "<path> <exports(5) options>"
#   VMREPRO_NFS_VERSIONS  versions to serve, e.g. "3 4.0 4.1 4.2"
#   VMREPRO_NFSD_THREADS  nfsd threads
#   VMREPRO_BLOCK_SIZE    /proc/fs/nfsd/max_block_size in bytes ("" = the kernel's)
#   VMREPRO_UDP           "yes" to also serve UDP (for NFSv2/v3 clients)
#
# With NFSv4 on, the server's grace period would hold every client's first OPEN for
# 90 s after start; the profile shortens the v4 lease and grace time to 10 s (before
# nfsd starts, which is when the kernel reads them) and waits them out, so a client's
# first operation is not measured against the grace period.
set -eu
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
: "${VMREPRO_EXPORTS:?no export given}" "${VMREPRO_NFS_VERSIONS:?}" "${VMREPRO_NFSD_THREADS:?}"
BLOCK_SIZE=${VMREPRO_BLOCK_SIZE:-}
UDP=${VMREPRO_UDP:-no}

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

[ -z "$BLOCK_SIZE" ] || echo "$BLOCK_SIZE" > /proc/fs/nfsd/max_block_size
has() { case " $VMREPRO_NFS_VERSIONS " in *" $1 "*) return 0 ;; esac; return 1; }
# NFSv2 is left alone unless asked for (6.x kernels are built without it and refuse
# any mention of it); "4" means every minor version.
flags=""
has 2 && flags="$flags --nfs-version 2"
if has 3; then flags="$flags --nfs-version 3"; else flags="$flags --no-nfs-version 3"; fi
v4=no
for m in 4 4.0 4.1 4.2; do has "$m" && v4=yes; done
if [ "$v4" = yes ]; then
  flags="$flags --nfs-version 4"
  for m in 4.0 4.1 4.2; do
    if has "$m" || has 4; then flags="$flags --nfs-version $m"; else flags="$flags --no-nfs-version $m"; fi
  done
else
  flags="$flags --no-nfs-version 4"
fi
if [ "$v4" = yes ]; then
  echo 10 > /proc/fs/nfsd/nfsv4leasetime
  [ -e /proc/fs/nfsd/nfsv4gracetime ] && echo 10 > /proc/fs/nfsd/nfsv4gracetime
fi
transports="--tcp"
[ "$UDP" = yes ] && transports="--tcp --udp"
# shellcheck disable=SC2086 # word splitting of the flag lists is intended
rpc.nfsd $flags $transports "$VMREPRO_NFSD_THREADS"
# shellcheck disable=SC2086
rpc.mountd $( [ "$v4" = yes ] || echo --no-nfs-version 4 )
[ "$v4" = no ] || sleep 11

echo "kernel: $(uname -r)"
echo "exports: $(exportfs -s | tr '\n' ';' | sed 's/;$//')"
echo "nfsd versions: $(cat /proc/fs/nfsd/versions)"
echo "nfsd threads: $(cat /proc/fs/nfsd/threads)"
echo "nfsd max_block_size: $(cat /proc/fs/nfsd/max_block_size)"
echo "nfsd ports: $(cat /proc/fs/nfsd/portlist | tr '\n' ' ')"
[ "$v4" = no ] || echo "nfsv4 lease/grace s: $(cat /proc/fs/nfsd/nfsv4leasetime)/$(cat /proc/fs/nfsd/nfsv4gracetime 2>/dev/null || echo -)"
echo "ipfrag_high_thresh: $(cat /proc/sys/net/ipv4/ipfrag_high_thresh)"
echo "ipfrag_time: $(cat /proc/sys/net/ipv4/ipfrag_time)"
