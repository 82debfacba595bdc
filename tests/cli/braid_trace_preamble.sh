# Sourced by the braid_trace_*.sh tests: their first three arguments and the helpers they share.
#   SCRIPT BRAID_TRACE FIXTURES PYTHON3 [...]
set -eu
trace="$1"
fixtures="$2"
py="$3"

# report CASE: braid-trace's text on trace_fixtures/CASE into $out, printed for the test's log.
report() {
  out=$("$trace" --no-timeline "$fixtures/$1")
  echo "$out"
}

# has PATTERN: a line of $out matches PATTERN (grep's basic expression), else the test fails.
has() {
  if ! echo "$out" | grep -q -- "$1"; then
    echo "no line matches: $1"
    exit 1
  fi
}

# check_json CASE ASSERTS: Python ASSERTS on d, braid-trace --json's object for CASE.
check_json() {
  "$trace" --json --no-timeline "$fixtures/$1" | "$py" -c "import json, sys
d = json.load(sys.stdin)
$2
print('json: ok')"
}
