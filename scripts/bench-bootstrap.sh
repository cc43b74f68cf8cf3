#!/usr/bin/env bash
# usage: scripts/bench-bootstrap.sh
# Installs what scripts/bench.sh needs: scripts/bootstrap.sh's packages, which
# now include both of these (tests/integration/bench_test.sh runs the suite at
# tiny sizes), and checks gnuplot (plots for docs/benchmarks.md; the no-X11
# build) and valgrind (callgrind instruction counts, and <valgrind/callgrind.h>
# for the client requests in bench/). Idempotent; Debian 12; root.
set -euo pipefail
"$(dirname "$0")/bootstrap.sh"
PKGS=(gnuplot-nox valgrind python3)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "bench-bootstrap: all ${#PKGS[@]} packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-bootstrap: missing packages (${missing[*]}) and not root; run as root" >&2
  exit 1
fi
echo "bench-bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "bench-bootstrap: done"
