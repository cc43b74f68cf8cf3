#!/usr/bin/env bash
# usage: tests/integration/contract_scenario.sh MANIFESTS_DIR [4|6]
#
# The client side of the cross-mode contract test (contract_test.sh; docs/contract.md
# C16), mode-agnostic: it only sends requests from ${P}client of a lab
# built by scripts/lab.sh (P = LAB_PREFIX) and edits the EndpointSlice in
# MANIFESTS_DIR, which a running vipd (any mode) watches, loaded with
# tests/data/contract/*.yaml. It never asks vipd anything, so the same script
# runs against dpdk, iptables, nftables and ipvs mode, on the host or in the IPVS guest.
# The second argument is the address family (default 4): 6 sends the same
# requests to the Services' IPv6 clusterIPs (fd00:96::100..103, a lab built with
# LAB_IPV6=1) and removes pod1's IPv6 address from db's IPv6 slice
# (endpointslice-db-v6.yaml); the outcome has the same keys and values.
#
# Prints one JSON object: the observable outcome, with no timings or counts
# that depend on the mode's distribution:
#   db_tcp, db_udp     pods reached by 120 new TCP flows / 60 UDP flows to db
#                      (pod4 is not ready); a failed request shows as "FAILED"
#   empty_tcp, empty_udp  what a client sees with no endpoints ("refused")
#   sticky_pods        how many pods 40 flows of one client reached (affinity)
#   fallback           pods reached when only serving+terminating endpoints exist
#   other_port         a port the VIP does not serve: "not-forwarded" unless a pod answered
#   db_after_removal   pods reached once pod1 left the EndpointSlice
# and, under "info" (not compared): the raw client results and how long the
# removal took to show in the traffic.
set -uo pipefail
MANIFESTS=${1:?usage: contract_scenario.sh MANIFESTS_DIR [4|6]}
FAMILY=${2:-4}
case $FAMILY in   # H: the VIPs of db, empty, sticky, fallback as a URL / HOST:PORT host
  4) H=(10.96.0.100 10.96.0.101 10.96.0.102 10.96.0.103); SLICE=endpointslice-db.yaml; POD1=10.244.1.15 ;;
  6) H=("[fd00:96::100]" "[fd00:96::101]" "[fd00:96::102]" "[fd00:96::103]"); SLICE=endpointslice-db-v6.yaml
     POD1=fd00:244::1:15 ;;
  *) echo "contract_scenario.sh: family must be 4 or 6, got '$FAMILY'" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi
: "${P:?P (the lab prefix) must be set}"
client() { ip netns exec "${P}client" "$PYTHON" scripts/lab/client.py "$@"; }
declare -A R

R[db_tcp]=$(client http "http://${H[0]}:8080/" --count 120 --timeout 2 --max-time 60)
R[db_udp]=$(client udp "${H[0]}:9053" --count 60 --timeout 1 --max-time 30)
R[empty_tcp]=$(client connect "${H[1]}:80" --timeout 2)
R[empty_udp]=$(client udp "${H[1]}:53" --count 3 --timeout 1 --max-time 10)
R[sticky]=$(client http "http://${H[2]}:8080/" --count 40 --timeout 2 --max-time 30)
R[fallback]=$(client http "http://${H[3]}:8080/" --count 30 --timeout 2 --max-time 30)
R[other_port]=$(client connect "${H[0]}:9999" --timeout 1)

# pod1 leaves db's slice; wait (bounded) until new flows stop reaching it, then measure.
t0=${EPOCHREALTIME/./}
stage=$(mktemp -d "$MANIFESTS/../contract-stage.XXXXXX")
"$PYTHON" scripts/lab/slice_without.py "$MANIFESTS/$SLICE" "$POD1" "$stage" >/dev/null
rmdir "$stage" 2>/dev/null
applied_ms=
for _ in $(seq 1 30); do   # bounded: 30 probes of 10 flows
  r=$(client http "http://${H[0]}:8080/" --count 10 --timeout 2 --max-time 20)
  if "$PYTHON" -c 'import json,sys; sys.exit(0 if "pod1" not in json.loads(sys.argv[1])["by_pod"] else 1)' "$r" 2>/dev/null; then
    applied_ms=$(( (${EPOCHREALTIME/./} - t0) / 1000 ))
    break
  fi
  sleep 0.2
done
R[db_after_removal]=$(client http "http://${H[0]}:8080/" --count 120 --timeout 2 --max-time 60)

"$PYTHON" - "$applied_ms" "${R[db_tcp]}" "${R[db_udp]}" "${R[empty_tcp]}" "${R[empty_udp]}" \
  "${R[sticky]}" "${R[fallback]}" "${R[other_port]}" "${R[db_after_removal]}" <<'PY'
import json, sys
applied_ms = sys.argv[1]
names = ["db_tcp", "db_udp", "empty_tcp", "empty_udp", "sticky", "fallback", "other_port", "db_after_removal"]
raw = dict(zip(names, sys.argv[2:]))

def parsed(k):
    try:
        return json.loads(raw[k])
    except ValueError:
        return None

def pods(k):
    r = parsed(k)
    if r is None:
        return ["NO-RESULT"]
    out = sorted(r.get("by_pod", {}))
    return out + ["FAILED"] if r.get("failed", 0) else out

def refused_udp(k):
    r = parsed(k)
    if r is None:
        return "NO-RESULT"
    if r.get("ok"):
        return "answered"
    errs = r.get("errors", {})
    return "refused" if errs.get("ConnectionRefusedError", 0) == r.get("failed") else "errors:" + ",".join(sorted(errs))

sticky = parsed("sticky")
out = {
    "db_tcp": pods("db_tcp"),
    "db_udp": pods("db_udp"),
    "empty_tcp": raw["empty_tcp"].strip(),
    "empty_udp": refused_udp("empty_udp"),
    "sticky_pods": (len(sticky.get("by_pod", {})) if sticky and not sticky.get("failed") else "FAILED"),
    "fallback": pods("fallback"),
    "other_port": "forwarded" if raw["other_port"].strip() == "connected" else "not-forwarded",
    "db_after_removal": pods("db_after_removal"),
    "info": {"removal_seen_after_ms": int(applied_ms) if applied_ms else None,
             "other_port_raw": raw["other_port"].strip(),
             "results": {k: parsed(k) for k in names if parsed(k) is not None}},
}
print(json.dumps(out, sort_keys=True))
PY
