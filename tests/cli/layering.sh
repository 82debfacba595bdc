#!/usr/bin/env bash
# The layering check (scripts/check_layers.py) passes on the tree, and on a copy of it with one
# forbidden include fails, naming that file and line as its one problem: a transport including
# core, the PyTorch backend including core, and a tool's include without a folder of a header
# that is not beside it.
set -euo pipefail
root="$1"
python3 "$root/scripts/check_layers.py" --root "$root"
t="$(mktemp -d)"
trap 'rm -rf "$t"' EXIT
cp -r "$root/docs" "$root/include" "$root/src" "$root/perf" "$root/tools" "$root/python" "$t/"
# expect_one_problem FILE TEXT WANT: the copy, with FILE (relative to it) holding TEXT, fails the
# check with WANT as its one problem (the copy holds every folder the check reads); FILE is
# removed after.
expect_one_problem() {
  local file="$t/$1" out
  printf '%b' "$2" >"$file"
  if out="$(python3 "$root/scripts/check_layers.py" --root "$t" 2>&1)"; then
    echo "layering.sh: the check passed $1" >&2
    exit 1
  fi
  if ! grep -qF "$3" <<<"$out" || ! grep -qF "check_layers: 1 problem(s)" <<<"$out"; then
    printf 'layering.sh: expected "%s" as the one problem, got:\n%s\n' "$3" "$out" >&2
    exit 1
  fi
  rm "$file"
  echo "layering.sh: forbidden include named: $3"
}
expect_one_problem src/transport/forbidden.cc '#include "base/error.h"\n#include "core/comm.h"\n' \
  'src/transport/forbidden.cc:2: includes "core/...": src/transport may include base, braid, device'
# The PyTorch backend (python/braid_torch) is over the public header alone, like a program.
expect_one_problem python/braid_torch/forbidden.cc '#include "braid/braid.h"\n#include "core/comm.h"\n' \
  'python/braid_torch/forbidden.cc:2: includes "core/...": python/braid_torch may include braid'
# A header found through an include path, not beside the file, would hide its part.
expect_one_problem tools/braid_tune/forbidden.cc '#include "tune.h"\n#include "common.h"\n' \
  'tools/braid_tune/forbidden.cc:2: includes "common.h", which is not beside it'
