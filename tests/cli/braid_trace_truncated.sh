#!/bin/sh
# braid-trace on damaged dumps, which it reads as far as they go and never crashes on:
#  - rank 1's file is cut in the middle of its third call (line 9): a problem names the file and
#    line, and its first two calls are still used; rank 2's file is not a dump: a problem, and
#    the verdict says its dump could not be read; rank 0's has a field of the wrong type.
#  - every cut of a dump (by line, and every 37th byte), wrong types, missing fields, a corrupt
#    line, a reformatted dump, an empty file and binary bytes: exit 0 or 1, no crash.
#   braid_trace_truncated.sh BRAID_TRACE FIXTURES PYTHON3
. "$(dirname "$0")/braid_trace_preamble.sh"
report truncated
has "truncated/rank-1.json line 9: expected a \"calls\" element .*cut off"
has "truncated/rank-2.json line 1: not a braid-trace dump"
has "truncated/rank-0.json line 8: calls.algo is not a string"
has "rank 2's dump .*rank-2.json could not be read"
check_json truncated '
v = d["verdict"]
assert v["ranks_with_dump"] == [0, 1], v
np = {e["rank"]: e for e in v["never_posted"]}
assert np[1]["last_finished"] == 2 and np[1]["dump_cut_off"], np
lines = {(p["file"].split("/")[-1], p["line"]) for p in d["problems"]}
assert {("rank-0.json", 8), ("rank-1.json", 9), ("rank-2.json", 1)} <= lines, lines
'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/d"
src="$fixtures/steps/rank-0.json"
# read WHAT: braid-trace on $tmp/d exits 0 or 1 (128 and more is a signal: a crash).
read_dumps() {
  rc=0
  "$trace" --no-timeline "$tmp/d" >"$tmp/out" 2>&1 || rc=$?
  if [ "$rc" -gt 1 ]; then
    echo "braid-trace exited $rc on $1:"
    cat "$tmp/out"
    exit 1
  fi
}
# cuts UNIT LAST STRIDE: rank-0.json as the first 0, STRIDE, ... LAST lines (-n) or bytes (-c).
cuts() {
  n=0
  while [ "$n" -le "$2" ]; do
    head "$1" "$n" "$src" >"$tmp/d/rank-0.json"
    read_dumps "head $1 $n of $src"
    n=$((n + $3))
  done
}
cuts -n "$(wc -l <"$src")" 1
cuts -c "$(wc -c <"$src")" 37
sed 's/"rank":0/"rank":"zero"/; s/"count":1024/"count":[1]/; s/"kind":"send",//' "$src" >"$tmp/d/rank-0.json"
sed -n 1,8p "$src" >"$tmp/d/rank-1.json"
echo '{"id":9,"comm":5,' >>"$tmp/d/rank-1.json"
sed -n '9,$p' "$src" >>"$tmp/d/rank-1.json"
"$py" -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])), indent=2))' "$src" >"$tmp/d/rank-2.json"
: >"$tmp/d/rank-3.json"
printf '\000\001\002' >"$tmp/d/rank-4.json"
read_dumps "corrupted files"
cat "$tmp/out"
grep -q "rank-1.json line 9: expected a \"calls\" element" "$tmp/out"
grep -q "rank-0.json line 2: header.rank is not an integer" "$tmp/out"
grep -q "rank-2.json: not laid out one element per line" "$tmp/out"
grep -q "rank-3.json: empty" "$tmp/out"
