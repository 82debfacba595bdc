#!/usr/bin/env bash
# The layering check (scripts/check_layers.py) passes on the tree, and on a copy of it with
# one forbidden include (a transport including core; then the PyTorch backend including core)
# fails, naming that file and line.
set -euo pipefail
root="$1"
python3 "$root/scripts/check_layers.py" --root "$root"
t="$(mktemp -d)"
trap 'rm -rf "$t"' EXIT
cp -r "$root/docs" "$root/include" "$root/src" "$root/perf" "$root/tools" "$root/python" "$t/"
printf '#include "base/error.h"\n#include "core/comm.h"\n' >"$t/src/transport/forbidden.cc"
if out="$(python3 "$root/scripts/check_layers.py" --root "$t" 2>&1)"; then
  echo "layering.sh: the check passed a transport including core" >&2
  exit 1
fi
want='src/transport/forbidden.cc:2: includes "core/...": src/transport may include base, braid, device'
if ! grep -qF "$want" <<<"$out"; then
  printf 'layering.sh: expected "%s", got:\n%s\n' "$want" "$out" >&2
  exit 1
fi
# The copy holds every folder the check reads: the forbidden include is its only problem.
if ! grep -qF "check_layers: 1 problem(s)" <<<"$out"; then
  printf 'layering.sh: expected one problem in the copy, got:\n%s\n' "$out" >&2
  exit 1
fi
echo "layering.sh: forbidden include named: $want"
# The PyTorch backend (python/braid_torch) is over the public header alone, like a program.
rm "$t/src/transport/forbidden.cc"
printf '#include "braid/braid.h"\n#include "core/comm.h"\n' >"$t/python/braid_torch/forbidden.cc"
out="$(python3 "$root/scripts/check_layers.py" --root "$t" 2>&1)" && {
  echo "layering.sh: the check passed the PyTorch backend including core" >&2
  exit 1
}
want='python/braid_torch/forbidden.cc:2: includes "core/...": python/braid_torch may include braid'
if ! grep -qF "$want" <<<"$out"; then
  printf 'layering.sh: expected "%s", got:\n%s\n' "$want" "$out" >&2
  exit 1
fi
echo "layering.sh: forbidden include named: $want"
