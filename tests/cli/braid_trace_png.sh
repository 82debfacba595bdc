#!/bin/sh
# braid-trace --png: without gnuplot on PATH it says so and exits 3, the chart's data and
# script written; with gnuplot (else skipped, 77) the Gantt chart of one call is a PNG, for the
# call named by --call and for the default one (the hung call).
#   braid_trace_png.sh BRAID_TRACE FIXTURES
set -eu
trace="$1"
fixtures="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
PATH=/nonexistent "$trace" --no-timeline --png "$tmp/none.png" "$fixtures/steps" >/dev/null \
  2>"$tmp/err" || rc=$?
cat "$tmp/err"
[ "$rc" = 3 ]
grep -q "gnuplot is not installed" "$tmp/err"
[ -s "$tmp/none.dat" ] && [ -s "$tmp/none.gp" ]
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "skipped: gnuplot is not installed (apt-get install gnuplot-nox)"
  exit 77
fi
is_png() {
  [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e47 ]
}
"$trace" --no-timeline --png "$tmp/steps.png" --call 5e6f7081:1 "$fixtures/steps" |
  grep -q "^Chart of comm 5e6f7081 #1: $tmp/steps.png"
is_png "$tmp/steps.png"
grep -q "title 'wait'" "$tmp/steps.gp"
"$trace" --no-timeline --png "$tmp/hang.png" "$fixtures/never_posted" | grep -q "#12: $tmp/hang.png"
is_png "$tmp/hang.png"
grep -q "'rank 2 (no #12)' 2" "$tmp/hang.gp"
echo "png: ok"
