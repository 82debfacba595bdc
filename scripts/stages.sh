# Sourced by .ci/run and the scripts it calls: each stage's wall time goes to the file named by
# $BRAID_STAGE_TIMES (when set), and .ci/run prints them as one table at the end.
#   stage_begin; ...; stage_end NAME STATUS      (seconds since stage_begin)
#   stage_run NAME COMMAND...                     (runs it; returns its status)
#   stage_table [WALL]                            (the table of the rows so far, and the total)
stage_begin() { BRAID_STAGE_START=$SECONDS; }
stage_end() {  # NAME STATUS
  local secs=$((SECONDS - ${BRAID_STAGE_START:-$SECONDS}))
  if [ -n "${BRAID_STAGE_TIMES:-}" ]; then
    printf '%s\t%s\t%s\n' "$1" "$secs" "$2" >>"$BRAID_STAGE_TIMES"
  fi
  echo "stage: $1: ${secs} s ($([ "$2" = 0 ] && echo ok || echo "failed, status $2"))"
}
stage_run() {  # NAME COMMAND...
  local name="$1" rc=0
  shift
  stage_begin
  "$@" || rc=$?
  stage_end "$name" "$rc"
  return "$rc"
}
stage_table() {  # [WALL_SECONDS: the run's own elapsed time, where stages overlapped]
  [ -n "${BRAID_STAGE_TIMES:-}" ] && [ -s "$BRAID_STAGE_TIMES" ] || return 0
  awk -F'\t' -v wall="${1:-}" '
    BEGIN { printf "\n| %-34s | %7s | %-10s |\n|%s|%s|%s|\n", "stage", "wall s", "result",
                   "------------------------------------", "---------", "------------" }
    { printf "| %-34s | %7d | %-10s |\n", $1, $2, $3 == 0 ? "ok" : "status " $3; t += $2 }
    END {
      if (wall == "") printf "| %-34s | %7d | %-10s |\n", "total", t, ""
      else printf "| %-34s | %7d | %-10s |\n", "total (wall clock; builds overlap)", wall, ""
    }' "$BRAID_STAGE_TIMES"
}
