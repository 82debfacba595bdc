#!/bin/sh
# nccl-tests' flags end to end (issue 34): the refusals exit with status 2 naming the flag (-K,
# which no nccl-tests has, among them); all_reduce_perf on 2 thread ranks with most of the
# flags at once prints what they ask for (-I's columns, -C's cputime, -S's stamps, -M's report,
# -N's second sweep, a '#' line for each flag a host has no counterpart of) and writes -J's
# JSON document in nccl-tests' shape (perf_json_check.py); a second run keeps the first file
# and writes FILE.0; 2 braidrun processes give per-process rows with -I; alltoall_perf's
# in_place is null; and every getopt_long name is taken.
#   perf_nccl_flags.sh ALL_REDUCE_PERF ALLTOALL_PERF BRAIDRUN PERF_JSON_CHECK_PY
perf="$1"
a2a="$2"
braidrun="$3"
check="$4"
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
has() {  # has FILE TEXT...: every TEXT is in FILE
  f="$1"
  shift
  for want in "$@"; do
    grep -qF -- "$want" "$f" || { cat "$f"; fail "no '$want' in the output"; }
  done
}

refused() {  # refused TEXT ARGS...: the binary exits 2 and says TEXT
  want="$1"
  shift
  "$perf" "$@" > "$d/out" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] || { cat "$d/out"; fail "$*: status $rc, want 2"; }
  has "$d/out" "$want"
}
refused "unknown option '-K'" -K 1
refused "-I (--per_iter_timing)" -I 2
refused "-B (--buffers)" -M device
refused "needs -R (--local_register) 2" -D 1
refused "-V (--device_cta_count)" -V 0
refused "-z (--blocking)" --blocking 3
refused "-a (--average)" -a 4
refused "-u (--unalign)" -u -1

# Sizes 8, 32, 128 and 512, twice (-N 2): 8 rows.
"$perf" -t 2 -b 8 -e 1K -f 4 -n 3 -w 1 -N 2 -I 1 -S 1 -C 1 -u 1 -R 1 -M 1 -G 1 -x 1 -y 1 \
  -p 0 -a 3 -z 2 -T 60 -J "$d/t.json" > "$d/out" 2>&1 || { cat "$d/out"; fail "the run failed"; }
cat "$d/out"
has "$d/out" "# Writing JSON output to $d/t.json" "unalign: 1" "i_p99" "i_cv%" "cputime" \
  "timestamp" "# Host memory usage" "Initialization" "# Peak resident memory" \
  "# Benchmark buffers" "# -C 1:" "# -G 1:" "# -x 1:" "# -y 1:" "# -p 0:" \
  "Blocking Enabled: wait for completion after each collective (no barrier)" \
  "# Timeout: 60 s" "# Buffers registered with braidCommRegister" "Out of bounds values : 0 OK"
rows=$(grep -c '^ *[0-9]' "$d/out")
[ "$rows" -eq 8 ] || fail "$rows rows, want 8"
stamped=$(grep -Ec '^ *[0-9].*[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}$' "$d/out")
[ "$stamped" -eq 8 ] || fail "$stamped rows end with a timestamp, want 8"
python3 "$check" "$d/t.json" --ranks 2 --rows 8 --per-iter --cputime || fail "t.json"

# An existing file is kept; the next free name gets the run. The job's secret and variables that
# are not NCCL's or Braid's settings stay out of the file (perf_json_check.py).
BRAID_COMM_SECRET=hunter2 SOME_API_TOKEN=hunter3 \
  "$perf" -t 2 -b 8 -e 8 -n 1 -w 0 -J "$d/t.json" > "$d/out" 2>&1 || { cat "$d/out"; fail "rerun"; }
! grep -q hunter "$d/t.json.0" || fail "a secret is in t.json.0"
has "$d/out" "# Writing JSON output to $d/t.json.0"
python3 "$check" "$d/t.json.0" --ranks 2 --rows 1 || fail "t.json.0"
python3 "$check" "$d/t.json" --ranks 2 --rows 8 --per-iter --cputime || fail "t.json overwritten"

# Two processes: only process 0 writes, and -I's JSON has a row per process.
"$braidrun" -n 2 "$perf" -b 8 -e 64 -f 8 -n 4 -w 1 -I 1 -J "$d/p.json" > "$d/out" 2>&1 ||
  { cat "$d/out"; fail "braidrun"; }
[ ! -e "$d/p.json.0" ] || fail "process 1 wrote a document too"
python3 "$check" "$d/p.json" --ranks 2 --processes 2 --rows 2 --per-iter || fail "p.json"

# No in-place form: in_place is null. -D with -R 2 and -V are accepted and named.
"$a2a" -t 2 -b 64 -e 64 -n 2 -w 1 -I 1 -D 1 -R 2 -V 64 -J "$d/a.json" > "$d/out" 2>&1 ||
  { cat "$d/out"; fail "alltoall_perf"; }
has "$d/out" "# -D 1:" "# -R 2:" "# -V 64:"
python3 "$check" "$d/a.json" --ranks 2 --rows 1 --per-iter --no-in-place || fail "a.json"

# -o mulsum: nccl-tests' PreMulSum (+1 on even ranks, -1 on odd ones), every result checked.
"$perf" -t 3 -b 8 -e 4K -f 8 -n 2 -w 1 -o mulsum -d all > "$d/out" 2>&1 ||
  { cat "$d/out"; fail "-o mulsum"; }
has "$d/out" "mulsum" "Out of bounds values : 0 OK"

# Every getopt_long name of nccl-tests.
"$perf" --nthreads 2 --ngpus 1 --minbytes 8 --maxbytes 64 --stepbytes 8 --stepfactor 2 \
  --iters 2 --agg_iters 2 --warmup_iters 1 --run_cycles 1 --parallel_init 1 --check 1 --op sum \
  --datatype float --root 0 --blocking 1 --stream_null 0 --timeout 60 --cudagraph 0 \
  --report_cputime 0 --report_timestamps 0 --output_file "$d/l.json" --average 1 \
  --local_register 2 --cta_policy -1 --device_implementation 0 --device_cta_count 16 \
  --memory 0 --unalign 0 --per_iter_timing 0 > "$d/out" 2>&1 || { cat "$d/out"; fail "long names"; }
has "$d/out" "Parallel Init Enabled" "# -R 2:" "Blocking Enabled: wait for completion and barrier"
python3 "$check" "$d/l.json" --ranks 2 --rows 4 || fail "l.json"
"$perf" --help > "$d/out" 2>&1 || fail "--help"
has "$d/out" "--per_iter_timing" "--device_implementation" "--buffers"
echo "perf_nccl_flags: OK"
