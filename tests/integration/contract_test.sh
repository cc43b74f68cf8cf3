#!/usr/bin/env bash
# usage: tests/integration/contract_test.sh
#
# Modes are interchangeable (docs/contract.md C16): the same
# manifests (tests/data/contract/) and the same client requests
# (contract_scenario.sh) give the same observable outcome with vipd in dpdk mode
# and in iptables and nftables mode, each in a fresh namespace lab (scripts/lab.sh) on this
# machine, and in ipvs mode inside the IPVS guest (this machine's kernel has no
# IPVS; scripts/kernel-vm.sh) when tests/integration/ipvs_contract.sh exists
# and can run. The outcome covers which pods receive new flows (a not-ready
# endpoint gets none; serving+terminating endpoints are the fallback), what a
# client sees with no endpoints (refused, TCP and UDP), ClientIP affinity, a
# port the VIP does not serve, and an endpoint removal.
#
# Checks, per mode M: contract-M-<case> (the outcome the contract asks for), then
# modes-agree (the outcomes, distribution aside, are identical). Prints PASS:/
# FAIL:/SKIP: lines; exit 0 all passed, 1 any failed, 77 cannot run here.
# Env: VIPD_BUILD_DIR (default build), CONTRACT_MODES (default "dpdk iptables nftables ipvs").
set -uo pipefail
NAME=contract_test
MODES=(${CONTRACT_MODES:-dpdk iptables nftables ipvs})
CASES=(db-tcp db-udp empty-tcp empty-udp affinity fallback other-port removal)
CHECKS=()
for m in "${MODES[@]}"; do for c in "${CASES[@]}"; do CHECKS+=("contract-$m-$c"); done; done
CHECKS+=(modes-agree)
SKIP_HINT="run as root on a kernel with network namespaces, veth, bridge and netfilter"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
require_vipd

export LAB_PREFIX="vc$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-contract.XXXXXX)
lib_traps

# The outcome the contract asks for (contract_scenario.sh's keys -> value).
EXPECTED='{"db_tcp": ["pod1", "pod2", "pod3"], "db_udp": ["pod1", "pod2", "pod3"],
  "empty_tcp": "refused", "empty_udp": "refused", "sticky_pods": 1, "fallback": ["pod2"],
  "other_port": "not-forwarded", "db_after_removal": ["pod2", "pod3"]}'

# Judges one mode's outcome: a PASS/FAIL line per case.
judge_mode() {
  local mode=$1 out=$2 line
  while IFS= read -r line; do
    case $line in
      ok\ *) pass "contract-$mode-${line#ok }" ;;
      bad\ *) line=${line#bad }; fail "contract-$mode-${line%% *}" "${line#* }" ;;
    esac
  done < <("$PYTHON" - "$EXPECTED" "$out" <<'PY'
import json, sys
want = json.loads(sys.argv[1])
try:
    got = json.loads(sys.argv[2])
except ValueError:
    got = {}
cases = [("db-tcp", "db_tcp"), ("db-udp", "db_udp"), ("empty-tcp", "empty_tcp"), ("empty-udp", "empty_udp"),
         ("affinity", "sticky_pods"), ("fallback", "fallback"), ("other-port", "other_port"),
         ("removal", "db_after_removal")]
for name, key in cases:
    if got.get(key) == want[key]:
        print("ok", name)
    else:
        print("bad", name, "want %s, got %s" % (json.dumps(want[key]), json.dumps(got.get(key, "no outcome"))))
PY
)
}

fresh_lab() {
  scripts/lab.sh down >/dev/null 2>&1
  lab_up
  rm -rf "$TMP/manifests" && mkdir -p "$TMP/manifests" && cp tests/data/contract/*.yaml "$TMP/manifests/"
}

start_mode() {
  local mode=$1 eal
  case $mode in
    dpdk)
      eal=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' config/demo/vipd.conf | tail -n 1)
      ip netns exec "${P}lb" "$VIPD" --config config/demo/vipd.conf --forward-method fnat \
        --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
        "--eal-args=$eal --file-prefix ${P}vipd" </dev/null >>"$TMP/vipd.log" 2>&1 & ;;
    iptables|nftables)
      lab_kernel_lb
      kernel_start_vipd "$mode" fnat ;;
  esac
  [ "$mode" = dpdk ] && VIPD_PID=$!
  wait_generation 1
}

declare -A OUT
for mode in "${MODES[@]}"; do
  if [ "$mode" = ipvs ]; then
    # The guest side lives with the IPVS test (it needs the guest's kernel).
    if [ ! -x tests/integration/ipvs_contract.sh ]; then
      for c in "${CASES[@]}"; do skip "contract-ipvs-$c" "tests/integration/ipvs_contract.sh is not there"; done
      continue
    fi
    out=$(bash tests/integration/ipvs_contract.sh 2>"$TMP/ipvs.err"); rc=$?
    if [ "$rc" -eq 77 ]; then
      why=$(grep -m1 -o 'SKIPPED: .*' "$TMP/ipvs.err" || tail -n 1 "$TMP/ipvs.err")
      for c in "${CASES[@]}"; do skip "contract-ipvs-$c" "the IPVS guest cannot run here: ${why:-exit 77}"; done
      continue
    fi
    [ "$rc" -eq 0 ] || note "ipvs_contract.sh exited with $rc: $(tail -n 3 "$TMP/ipvs.err" | tr '\n' ' ')"
  else
    fresh_lab
    : >"$TMP/vipd.log"
    if ! start_mode "$mode"; then
      for c in "${CASES[@]}"; do fail "contract-$mode-$c" "vipd ($mode) did not apply a table: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"; done
      stop_pid "$VIPD_PID"; VIPD_PID=
      continue
    fi
    out=$(P=$P bash tests/integration/contract_scenario.sh "$TMP/manifests")
    stop_pid "$VIPD_PID"; VIPD_PID=
  fi
  note "$mode: $out"
  OUT[$mode]=$out
  judge_mode "$mode" "$out"
done

# Same outcome in every mode that ran (the contract, not the mechanism: timings
# and the spread over pods are left out).
ran=("${!OUT[@]}")
if [ "${#ran[@]}" -lt 2 ]; then
  skip modes-agree "fewer than two modes produced an outcome (${ran[*]:-none})"
else
  args=()
  for m in "${ran[@]}"; do args+=("$m" "${OUT[$m]}"); done
  d=$("$PYTHON" - "${args[@]}" <<'PY'
import json, sys
a = sys.argv[1:]
outs = {}
for i in range(0, len(a), 2):
    try:
        o = json.loads(a[i + 1])
    except ValueError:
        o = {"error": "no outcome"}
    o.pop("info", None)
    outs[a[i]] = o
first = next(iter(outs))
diffs = []
for m, o in outs.items():
    for k in sorted(set(o) | set(outs[first])):
        if o.get(k) != outs[first].get(k):
            diffs.append("%s: %s=%s, %s=%s" % (k, first, json.dumps(outs[first].get(k)), m, json.dumps(o.get(k))))
print("; ".join(diffs))
PY
)
  if [ -z "$d" ]; then pass modes-agree; note "modes compared: ${ran[*]}"; else fail modes-agree "$d"; fi
fi
