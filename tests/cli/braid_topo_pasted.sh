#!/bin/sh
# braid-topo on terminal text as pasted (issue 37): every hand-written fixture of
# tests/topology/text_fixtures loads (--json); the pasted nvidia-smi topo -m (prompt, CR LF,
# tabs) prints the matrix it was given, NODE apart from PHB; text it cannot read is refused
# with exit 1, naming the line and never as XML.
#   braid_topo_pasted.sh BRAID_TOPO FIXTURES_DIR
topo="$1"
dir="$2"
for f in "$dir"/*.txt; do
  "$topo" --json --file "$f" >/dev/null || { echo "braid-topo failed on $f"; exit 1; }
done
out=$("$topo" --file "$dir/smi_topo_m_pasted.txt") || exit 1
for row in "GPU0  X     NV2   SYS   SYS   PIX   NODE  SYS   0" \
           "GPU1  NV2   X     SYS   SYS   PXB   NODE  SYS   0" \
           "GPU2  SYS   SYS   X     PHB   SYS   SYS   PHB   1" \
           "GPU3  SYS   SYS   PHB   X     SYS   SYS   PIX   1"; do
  echo "$out" | grep -qF "$row" || { echo "missing row: $row"; echo "$out"; exit 1; }
done
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf 'alice@node:~$ cat notes\r\nhello world\r\n' >"$tmp"
err=$("$topo" --file "$tmp" 2>&1)
[ $? = 1 ] || { echo "expected exit 1: $err"; exit 1; }
echo "$err" | grep -qF ":2: 'hello world': not a known topology format" || { echo "$err"; exit 1; }
if echo "$err" | grep -qi xml; then
  echo "$err" | grep -qF "expected NCCL or hwloc XML" || { echo "$err"; exit 1; }
fi
exit 0
