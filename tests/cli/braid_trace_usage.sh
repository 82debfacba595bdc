#!/bin/sh
# braid-trace's command line: an unknown flag, a flag without its value, a bad --call, no DIR
# and a DIR that does not exist exit 2 naming the argument; a folder without a dump exits 1;
# --help exits 0.
#   braid_trace_usage.sh BRAID_TRACE
set -u
trace="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# expect STATUS PATTERN ARGS...: the run exits STATUS and its stderr matches PATTERN.
expect() {
  want="$1"
  pattern="$2"
  shift 2
  "$trace" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -q -- "$pattern" "$tmp/err"; then
    echo "braid-trace $*: status $rc (expected $want), stderr:"
    cat "$tmp/err"
    echo "(expected to match: $pattern)"
    exit 1
  fi
  head -1 "$tmp/err"
}
expect 2 "unknown option '--bogus'" --bogus "$tmp"
expect 2 "unknown option '-x'" -x "$tmp"
expect 2 "--png needs a value" "$tmp" --png
expect 2 "--timeline needs a value" --timeline
expect 2 "--call 'abc': expected HASH:SEQ" --call abc "$tmp"
expect 2 "--call 'xyz:3': expected HASH:SEQ" --call xyz:3 "$tmp"
expect 2 "no dump folder (DIR) or files given" --json
expect 2 "cannot read '/nonexistent/trace-dir'" /nonexistent/trace-dir
expect 1 "no dump could be read from $tmp" --no-timeline "$tmp"
"$trace" --help | grep -q "^usage: braid-trace"
