#!/usr/bin/env bash
# Mutation evidence for cost_model's TSan filter (tests/tuning/meson.build: under TSan it runs only
# Selector.CommPredict, its case with threads), issue 31:
# - M-race: an unsynchronized counter in rankCandidates, reached from braidCommPredict on 4
#   thread ranks. TSan reports it with the whole test (before) and with the filter (after).
# - M-cost: ring all-reduce's closed form one round short. The release build's cost_model,
#   which runs every case as before, fails on it.
# Needs build (release) and build-tsan (scripts/sanitize.sh tsan --build) built; puts the
# source back after each mutant and rebuilds.
#   scripts/mutants/cost_model_tsan_filter.sh
set -u
cd "$(dirname "$0")/../.."
export TSAN_OPTIONS="halt_on_error=1:suppressions=$PWD/scripts/tsan.supp" UCX_HANDLE_ERRORS=none UCX_ERROR_SIGNALS= UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no OPENBLAS_NUM_THREADS=1
orig="$(mktemp)"
trap 'cp "$orig" src/tuning/cost_model.cc; rm -f "$orig"' EXIT
cp src/tuning/cost_model.cc "$orig"
python3 - <<'PY'
p='src/tuning/cost_model.cc'
s=open(p).read()
a="""                                      int* best) {
  std::vector<Candidate> out;
"""
assert a in s
s=s.replace(a, a+"  static int calls = 0;\n  ++calls;  // MUTATION: unsynchronized\n",1)
open(p,'w').write(s)
PY
ninja -C build-tsan tests/tuning/cost_model_test >build-tsan/mutant-build.log 2>&1 || { echo build failed; tail build-tsan/mutant-build.log; }
echo "== M-race, TSan, whole test (before):"; build-tsan/tests/tuning/cost_model_test >build/mut1.txt 2>&1; echo "exit $?"; grep -m1 "WARNING: ThreadSanitizer" build/mut1.txt; grep -m1 "MUTATION\|rankCandidates" build/mut1.txt
echo "== M-race, TSan, filtered (after):"; build-tsan/tests/tuning/cost_model_test --gtest_filter=Selector.CommPredict >build/mut2.txt 2>&1; echo "exit $?"; grep -m1 "WARNING: ThreadSanitizer" build/mut2.txt; grep -m1 "rankCandidates" build/mut2.txt
cp "$orig" src/tuning/cost_model.cc
ninja -C build-tsan tests/tuning/cost_model_test >/dev/null 2>&1
echo "== unmutated, TSan filtered:"; build-tsan/tests/tuning/cost_model_test --gtest_filter=Selector.CommPredict 2>&1 | tail -1
echo "== M-cost (ring all-reduce's closed form one round short), release cost_model:"
python3 - <<'PY'
p='src/tuning/cost_model.cc'
s=open(p).read()
a="round(S / m.n, c, false, m.n - 1).total();\n}\ndouble ringReduceScatter"
assert a in s
s=s.replace(a, a.replace("m.n - 1).total()","m.n - 2).total()"),1)
open(p,'w').write(s)
PY
ninja -C build tests/tuning/cost_model_test >/dev/null 2>&1
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 build/tests/tuning/cost_model_test >build/mut3.txt 2>&1; echo "exit $?"; grep "FAILED  \]" build/mut3.txt | head -3
cp "$orig" src/tuning/cost_model.cc
ninja -C build tests/tuning/cost_model_test >/dev/null 2>&1
echo "== unmutated release cost_model:"; GLIBC_TUNABLES=glibc.malloc.hugetlb=1 build/tests/tuning/cost_model_test 2>&1 | tail -1
