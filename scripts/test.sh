#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test suite. Under CI
# (.ci/run) each of the three is a timed stage.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=stages.sh
. scripts/stages.sh
stage_run set-up scripts/setup.sh --no-build build
stage_run build scripts/setup.sh build
stage_run suite meson test -C build --print-errorlogs "$@"
