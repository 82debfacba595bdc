#!/bin/sh
# braid-topo --json on every file of the fixture tree (the README excepted) and on each
# /sys/class/infiniband snapshot directory: each loads and prints. With a third argument,
# no-tarballs (a build without libarchive), the hwloc fsroot tarballs are passed over.
#   braid_topo_all_files.sh BRAID_TOPO TOPOLOGIES_DIR [no-tarballs]
topo="$1"
dir="$2"
if [ "$3" = no-tarballs ]; then
  files=$(find "$dir" -type f ! -name "*.tar.*" ! -name README.md \
    ! -path "*/sys-class-infiniband*/*")
else
  files=$(find "$dir" -type f ! -name README.md ! -path "*/sys-class-infiniband*/*")
fi
for f in $files $(find "$dir" -type d -name "sys-class-infiniband*"); do
  "$topo" --json --file "$f" >/dev/null || { echo "braid-topo failed on $f"; exit 1; }
done
