#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer + UndefinedBehaviorSanitizer (asan: every test)
# and ThreadSanitizer (tsan: the tests that run ranks as threads, Meson suite 'threads'), a
# third of each set per commit by default (BRAID_SANITIZE_TESTS, below; =all for every test), each
# in a build directory of its own (build-asan, build-tsan in the repository; -O1 with line
# tables, without CUDA). In a sanitized build the largest cases shrink (tests/test_scale.h, the
# soak's call counts in tests/cli/meson.build), and the matrix takes a share of its rows: one row
# per algorithm and a sixteenth of the others, the sixteenth chosen by the commit hash
# (BRAID_TEST_SHARE=K/16 picks one; BRAID_TEST_SAMPLED and collective_cases.h say which rows;
# the release build's 'matrix' runs every row).
# Any sanitizer report fails the run: reports are written to files (in the child processes
# too, whose exit status some tests expect to be non-zero) and printed at the end.
#   scripts/sanitize.sh [asan|tsan|all] [--build|--test] [TEST|@SUITE|@all ...]
#   (default: all, with the sets above; @SUITE selects a Meson suite, @all every test;
#   --build only builds what those tests need, --test only runs them)
# Environment: BRAID_SANITIZE_BUILD_PREFIX (build dirs' prefix, default <repo>/build),
# BRAID_SANITIZE_UBSAN=0 (asan without UBSan, in build-asan-only: a third of the build time),
# CC/CXX (default clang/clang++, installed when missing: its UBSan compiles in a fifth of
# g++'s time; g++ works too).
# Third-party findings (UCX, hwloc, Open MPI) are suppressed in scripts/*.supp; Braid's never.
set -euo pipefail

mode="${1:-all}"
case "$mode" in asan | tsan | all) ;; *) echo "usage: $0 [asan|tsan|all] [--build|--test] [TEST...]" >&2; exit 2 ;; esac
shift || true
# --build: build only; --test: run only (the build directory is built already); default both.
steps=both
case "${1:-}" in --build) steps=build; shift ;; --test) steps=test; shift ;; esac
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${BRAID_SANITIZE_BUILD_PREFIX:-$root/build}"
export CC="${CC:-clang}" CXX="${CXX:-clang++}"
# shellcheck source=need_clang.sh
. "$root/scripts/need_clang.sh"
# shellcheck source=stages.sh
. "$root/scripts/stages.sh"
need_clang

# Which share of the matrix's rows runs (collective_cases.h, Rows::kShare): BRAID_TEST_SHARE
# if set, else share K of 16 with K the commit hash modulo 16 (0 outside a git checkout).
share_of=16 share_index=0 share_why="no commit"
commit="$(git -C "$root" rev-parse HEAD 2>/dev/null)" || commit=""
if [ -n "${BRAID_TEST_SHARE:-}" ]; then
  share_index="${BRAID_TEST_SHARE%%/*}" share_of="${BRAID_TEST_SHARE#*/}" share_why="BRAID_TEST_SHARE"
elif [ -n "$commit" ]; then
  share_index=$((16#${commit:0:8} % share_of)) share_why="commit ${commit:0:12}"
fi

# The default sets: every test under ASan+UBSan; the 'threads' suite under TSan, the
# single-copy tests included (thread ranks share one mapping of each shared-memory segment,
# so TSan pairs the FIFO's release/acquire; see shm.h).
# libbraid links UCX, whose signal handlers would take a sanitizer's fault first, and whose
# libucm patches mmap/madvise/malloc: a thread exiting under TSan then crashes in libucm's hook
# (pthread's madvise of the dead thread's stack -> ucm_madvise -> an intercepted rwlock).
export UCX_HANDLE_ERRORS=none UCX_ERROR_SIGNALS= UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no

# Which third of the default sets runs: CI's 30 minutes hold the release suite and both
# sanitizers' builds only with a third of each default set (every test the release suite runs
# whole; with halves a fresh-clone run took 1705-1933 s), so each commit takes one third,
# which chosen by its hash (bits other than the matrix share's), and successive commits run
# every test under both sanitizers. The tests of a set are taken in name order, every third. BRAID_SANITIZE_TESTS=all runs every test;
# BRAID_SANITIZE_TESTS=K/N takes every Nth from the Kth. Tests named on the command line,
# and @SUITE there, always run whole.
half="" half_why=""
case "${BRAID_SANITIZE_TESTS:-}" in
  all) ;;
  */*) half="$BRAID_SANITIZE_TESTS" half_why="BRAID_SANITIZE_TESTS" ;;
  "")
    if [ -n "${commit:-}" ]; then
      half="$((16#${commit:8:8} % 3))/3" half_why="commit ${commit:0:12}"
    fi
    ;;
  *) echo "sanitize.sh: BRAID_SANITIZE_TESTS is '$BRAID_SANITIZE_TESTS'; give all or K/N" >&2; exit 2 ;;
esac

# Test names -> the executables they run (meson test --no-rebuild needs them built), or with
# BRAID_SELECT=tests the test names themselves. Names may be "@all" (every test) or "@SUITE"
# (the tests of a Meson suite); BRAID_SELECT_HALF=K/N keeps every Nth of the tests a suite
# selects, from the Kth, in name order.
targets_for() {  # BUILD_DIR TEST...
  local dir="$1"
  shift
  python3 - "$dir" "$@" <<'PY'
import json, os, sys
d, names = sys.argv[1], set(sys.argv[2:])
half = os.environ.get("BRAID_SELECT_HALF", "")
only_tests = os.environ.get("BRAID_SELECT", "") == "tests"
tests = json.load(open(os.path.join(d, "meson-info", "intro-tests.json")))
targets = json.load(open(os.path.join(d, "meson-info", "intro-targets.json")))
by_file = {f: t for t in targets for f in t["filename"]}
seen = set()
suites = {n[1:] for n in names if n.startswith("@")}
names -= {"@" + x for x in suites}
chosen = []
by_suite = []
for t in tests:
    wanted = "all" in suites or any(x in suites or x.endswith(":" + w)
                                    for x in t.get("suite", []) for w in suites)
    if t["name"] in names:
        chosen.append(t)
    elif wanted:
        by_suite.append(t)
if half:
    k, n = (int(x) for x in half.split("/"))
    by_suite.sort(key=lambda t: t["name"])
    by_suite = by_suite[k::n]
for t in chosen + by_suite:
    names.discard(t["name"])
    if only_tests:
        seen.add(t["name"])
        print(t["name"])
        continue
    wants = [by_file.get(f) or next((x for x in targets if x["id"] == f), None)
             for f in t["cmd"][:1] + t.get("depends", [])]
    # nccl_install installs the build (meson install): every installed target, whichever
    # share's other tests happen to build some of them.
    if t["name"] == "nccl_install":
        wants += [x for x in targets if x.get("installed")]
    for tgt in wants:
        if tgt is None:
            continue
        rel = os.path.relpath(tgt["filename"][0], d)
        if rel not in seen:
            seen.add(rel)
            print(rel)
if names:
    sys.exit("sanitize.sh: no such test: " + " ".join(sorted(names)))
if not seen:
    sys.exit("sanitize.sh: no test in " + " ".join("@" + x for x in sorted(suites)))
PY
}

run_mode() {  # MODE TEST...
  local m="$1"
  shift
  local dir="$prefix-$m" opts
  case "$m" in
    asan)
      # UBSan's checks triple the compile time of ASan alone (16 vs 5 CPU-minutes here).
      if [ "${BRAID_SANITIZE_UBSAN:-1}" = 0 ]; then
        dir="$prefix-asan-only"
        opts=(-Db_sanitize=address -Db_lundef=false)
      else
        opts=(-Db_sanitize=address,undefined -Db_lundef=false)
      fi
      ;;
    tsan) opts=(-Db_sanitize=thread -Db_lundef=false) ;;
  esac
  if [ "$steps" != test ]; then
    build_mode "$m" "$dir" "${opts[@]}" -- "$@" || return 1
  fi
  [ "$steps" != build ] || return 0
  test_mode "$m" "$dir" "$@"
}

build_mode() {  # MODE DIR MESON_OPTION... -- TEST...
  local m="$1" dir="$2" opts=()
  shift 2
  while [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  stage_begin
  if [ ! -f "$dir/build.ninja" ]; then
    # -O1 with line tables: a sixth less compile time than debugoptimized, whole stacks.
    # Frame pointers: ASan records the stack of every malloc and free with the frame-pointer
    # unwinder (fast_unwind_on_malloc=1, below), whole with them; the DWARF unwinder took 9
    # times the CPU of an allocating test (topology_text's mutated replays: 14.1 s to 1.5).
    # Without CUDA: no test can reach a GPU here, the tests' device paths run on the stand-in
    # runtime (tests/fake_cuda.h) either way, and nvcc's kernels took 34 CPU-s of each build.
    # Without torch: Python would have to load the sanitizer runtime first; the backend's
    # tests run in the release build.
    local flags="-O1 -gline-tables-only -fno-omit-frame-pointer"
    # Linked by lld (need_clang.sh installs it), when the compiler is clang: half ld.bfd's time.
    local link=()
    case "$CXX" in *clang*) link=(-Dc_link_args=-fuse-ld=lld -Dcpp_link_args=-fuse-ld=lld) ;; esac
    meson setup "$dir" "$root" --buildtype=plain -Dc_args="$flags" -Dcpp_args="$flags" \
      "${link[@]}" -Dcuda=disabled -Dtorch=disabled "${opts[@]}" >/dev/null
  fi
  local start=$SECONDS
  # An existing build directory may predate tests added since: regenerate it first, so that
  # the introspection below knows them.
  ninja -C "$dir" build.ninja >/dev/null 2>&1 || true
  local list
  list="$(BRAID_SELECT_HALF="$sel_half" targets_for "$dir" "$@")"
  mapfile -t targets <<<"$list"
  if ! ninja -C "$dir" "${targets[@]}" >"$dir/sanitize-build.log" 2>&1; then
    tail -n 40 "$dir/sanitize-build.log" >&2
    stage_end "$m build" 1
    return 1
  fi
  echo "sanitize.sh: $m: built ${#targets[@]} target(s) in $((SECONDS - start)) s"
  stage_end "$m build" 0
}

test_mode() {  # MODE DIR TEST...
  local m="$1" dir="$2" start
  shift 2
  local logs
  logs="$(mktemp -d /tmp/braid-$m.XXXXXX)"
  local common="halt_on_error=1:print_stacktrace=1:log_path=$logs/report"
  export ASAN_OPTIONS="$common:detect_leaks=1:fast_unwind_on_malloc=1:abort_on_error=0:detect_stack_use_after_return=0"
  export UBSAN_OPTIONS="$common"
  export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp:print_suppressions=0"
  export TSAN_OPTIONS="$common:second_deadlock_stack=1:suppressions=$root/scripts/tsan.supp"
  export TSAN_OPTIONS="$TSAN_OPTIONS:print_suppressions=0"
  # OpenBLAS's worker threads are not instrumented and hand work over through their own
  # spinning queue, which TSan cannot see (it reports their writes to a caller's fresh
  # buffer as races); one BLAS thread per caller keeps the ranks' threads the only ones.
  if [ "$m" = tsan ]; then export OPENBLAS_NUM_THREADS=1; fi
  # The matrix's share of rows (BRAID_TEST_SAMPLED=share or sampled-share, set per test in
  # tests/core/meson.build): share K of $share_of, K from the commit hash, so that successive
  # commits run every row.
  export BRAID_TEST_SHARE="$share_index/$share_of"
  echo "sanitize.sh: $m: the matrix takes row share $BRAID_TEST_SHARE ($share_why)"
  local status=0
  stage_begin
  start=$SECONDS
  # Sanitized code runs 2-15 times slower than a release build.
  local select=()
  if [ -n "$sel_half" ]; then
    echo "sanitize.sh: $m: share $sel_half of $* ($half_why; BRAID_SANITIZE_TESTS=all runs all)"
    mapfile -t select < <(BRAID_SELECT=tests BRAID_SELECT_HALF="$sel_half" targets_for "$dir" "$@")
  else
    for t in "$@"; do
      case "$t" in
        @all) ;;
        @*) select+=(--suite "${t#@}") ;;
        *) select+=("$t") ;;
      esac
    done
  fi
  meson test -C "$dir" --no-rebuild --print-errorlogs --timeout-multiplier 4 "${select[@]}" ||
    status=$?
  echo "sanitize.sh: $m: tests ran in $((SECONDS - start)) s"
  stage_end "$m tests" "$status"
  if compgen -G "$logs/report*" >/dev/null; then
    echo "sanitize.sh: $m: sanitizer reports (also in $logs):" >&2
    for f in "$logs"/report*; do
      echo "== $f" >&2
      cat "$f" >&2
    done
    status=1
  else
    rm -rf "$logs"
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS OPENBLAS_NUM_THREADS BRAID_TEST_SHARE
  return "$status"
}

status=0
sel_half=""
(($#)) || sel_half="$half"  # the default sets only
if [ "$mode" = asan ] || [ "$mode" = all ]; then
  if (($#)); then run_mode asan "$@" || status=1; else run_mode asan @all || status=1; fi
fi
if [ "$mode" = tsan ] || [ "$mode" = all ]; then
  if (($#)); then run_mode tsan "$@" || status=1; else run_mode tsan @threads || status=1; fi
fi
exit "$status"
