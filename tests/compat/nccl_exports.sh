#!/usr/bin/env bash
# libnccl.so.2's exports: every one is an ncclX or pncclX function (the version script,
# src/compat/libnccl.map, hides the rest), and each is called in a test of tests/compat (C or
# C++): by name, `name(`, or through nccl_230_test.c's SAME(ncclX, ...),
# which call ncclX and pncclX both. Fails listing the symbols that break either rule.
#   nccl_exports.sh LIBNCCL TEST_DIR
set -euo pipefail
lib="$1" dir="$2"
mapfile -t syms < <(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwiV]$/ {print $3}' | sed 's/@.*//' | sort -u)
[ "${#syms[@]}" -gt 0 ] || { echo "nccl_exports: $lib exports no function" >&2; exit 1; }
bad=0
for s in "${syms[@]}"; do
  case "$s" in
    nccl* | pnccl*) ;;
    *) echo "nccl_exports: $lib exports $s, which is not NCCL's" >&2; bad=1; continue ;;
  esac
  base="${s#p}"
  if ! grep -qE "(^|[^A-Za-z0-9_])$s[[:space:]]*\(|SAME\($base," "$dir"/*.c "$dir"/*.cc \
    2>/dev/null; then
    echo "nccl_exports: no test in $dir calls $s" >&2
    bad=1
  fi
done
# Data symbols would show as D/B/R: libnccl exports functions only.
if nm -D --defined-only "$lib" | awk '$2 ~ /^[DdBbRr]$/ {print $3}' | grep -q .; then
  echo "nccl_exports: $lib exports data: $(nm -D --defined-only "$lib" | awk '$2 ~ /^[DdBbRr]$/ {print $3}' | tr '\n' ' ')" >&2
  bad=1
fi
echo "nccl_exports: ${#syms[@]} functions exported$([ "$bad" = 0 ] && echo ', each called by a test')"
exit "$bad"
