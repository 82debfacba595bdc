#!/usr/bin/env bash
# Evidence that the training layer's range-checked loops (src/training/checked_ranges.h) still
# catch what their element-by-element instrumentation caught, issue 31. Builds one small
# program twice with clang, against src/training/optimizer.cc as the library compiles it:
# - ASan: Sgd::update told one element more than its buffers hold: a heap-buffer-overflow
#   report (the range check before the loop).
# - TSan: a thread writes a gradient while another runs AdamW::update on it, unsynchronized:
#   a data race report.
# Each must report; the script says which did and exits non-zero if one did not.
#   scripts/mutants/checked_ranges.sh
set -u
cd "$(dirname "$0")/../.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cat >"$work/probe.cc" <<'CC'
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "training/optimizer.h"

using namespace braid::training;

int main(int argc, char** argv) {
  std::vector<float> p(64, 1.0f), g(64, 0.5f);
  if (argc > 1 && std::strcmp(argv[1], "overflow") == 0) {
    Sgd sgd(0.1f, 0.9f);
    sgd.resize(64);
    sgd.update(p.data(), g.data(), 65, 0);  // one element beyond both buffers
    return 0;
  }
  AdamW adam(0.01f);
  adam.resize(64);
  std::atomic<bool> go{false};
  std::thread writer([&] {
    while (!go.load()) {
    }
    for (int i = 0; i < 1000; ++i) g[17] = static_cast<float>(i);  // no synchronization
  });
  go = true;
  for (int i = 0; i < 1000; ++i) {
    adam.beginStep();
    adam.update(p.data(), g.data(), 64, 0);
  }
  writer.join();
  return 0;
}
CC
status=0
probe() {  # NAME SANITIZER ARG EXPECTED
  local name="$1" san="$2" arg="$3" want="$4" out
  clang++ -std=c++20 -O1 -g -fsanitize="$san" -Isrc "$work/probe.cc" src/training/optimizer.cc \
    -o "$work/$name" || { echo "$name: does not build"; status=1; return; }
  out="$("$work/$name" "$arg" 2>&1)"
  if grep -q "$want" <<<"$out"; then
    echo "$name: reported ($want)"
  else
    echo "$name: NOT reported; output:"
    echo "$out" | tail -n 20
    status=1
  fi
}
ASAN_OPTIONS=detect_leaks=0 probe asan-overflow address overflow "heap-buffer-overflow"
TSAN_OPTIONS=halt_on_error=1 probe tsan-race thread race "data race"
exit "$status"
