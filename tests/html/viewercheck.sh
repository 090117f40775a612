#!/usr/bin/env bash
# viewercheck.sh DECODER SNAPGEN WORKDIR SHOTDIR - ctest's entry for
# viewercheck.py: installs chromium and python3 when it can (.ci/deps.sh
# --browser, as root), otherwise skips (exit 77) saying what to install.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! "$here/../../.ci/deps.sh" test_html_viewer --browser; then
  echo "SKIP: chromium and python3 are needed (see the line above)"
  exit 77
fi
exec python3 "$here/viewercheck.py" "$@"
