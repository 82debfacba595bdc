#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh build
meson test -C build --print-errorlogs "$@"
