#!/bin/sh
# braid-topo --fsroot on hwloc's 32-bit PCI domain tarball, extracted to a temporary
# directory: detection reads that root (its Ethernet NIC ens3) and skips NVML and libibverbs.
# Passes without checking when tar or bzip2 is missing.
#   braid_topo_fsroot.sh BRAID_TOPO TARBALL
topo="$1"
tarball="$2"
command -v tar >/dev/null && command -v bzip2 >/dev/null || exit 0
d=$(mktemp -d) && trap 'rm -rf "$d"' EXIT && tar xjf "$tarball" -C "$d" &&
  "$topo" --fsroot "$d/2pa-pcidomain32bits" > "$d/out" && cat "$d/out" &&
  grep -q "detected (fsroot $d/2pa-pcidomain32bits)" "$d/out" &&
  grep -q "NIC0 ens3 0000:00:03.0" "$d/out" && grep -q "NVML and libibverbs skipped" "$d/out"
