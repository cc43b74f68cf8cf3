#!/bin/bash
# The include graph between vipd's top-level folders, and a check that it
# follows the layers (docs/architecture.md):
#
#   common        <- everything
#   model         <- controlplane, dataplane, observability, cmd, bench, tests
#   controlplane  <- observability, cmd, bench, tests   (never dataplane)
#   dataplane     <- observability, cmd, bench, tests   (never controlplane)
#   observability <- cmd, bench, tests
#
# usage: scripts/layers.sh           print "from -> to (count)" for every edge
#        scripts/layers.sh --check   also fail (exit 1) on an edge the layers forbid
set -euo pipefail
cd "$(dirname "$0")/.."

allowed() {  # from to
  case "$1" in
    common) return 1 ;;
    model) [[ $2 == common ]] ;;
    controlplane|dataplane) [[ $2 == common || $2 == model ]] ;;
    observability) [[ $2 != cmd && $2 != bench && $2 != tests ]] ;;
    cmd|bench) [[ $2 != tests ]] ;;
    tests) return 0 ;;
    *) return 1 ;;
  esac
}

bad=0
for from in common model controlplane dataplane observability cmd bench tests; do
  [[ -d $from ]] || continue
  # "#include "<folder>/..." lines in the folder's C++ files, counted by target folder.
  while read -r count to; do
    [[ $to == "$from" ]] && continue
    mark=""
    if ! allowed "$from" "$to"; then mark="   <- not allowed"; bad=1; fi
    echo "$from -> $to ($count)$mark"
  done < <(grep -rhoE '^#include "[a-z_]+/' "$from" --include='*.h' --include='*.cc' \
             | sed -E 's/^#include "//; s#/$##' | sort | uniq -c)
done
if [[ ${1:-} == --check && $bad == 1 ]]; then
  echo "layers: an include crosses the layers the wrong way (see above)" >&2
  exit 1
fi
