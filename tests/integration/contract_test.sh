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
# Both address families: the Services are dual-stack (an IPv6 clusterIP in
# fd00:96::/112 beside the IPv4 one, IPv6 EndpointSlices with the same pods and
# conditions), every lab is built with LAB_IPV6=1, and in the same lab and vipd
# run the scenario is sent over IPv4 and then over IPv6, for the modes in
# CONTRACT_V6_MODES. A mode outside it gets the same dual-stack manifests and
# lab, only no IPv6 requests, and one loud SKIP line (contract-M-v6) saying why.
#
# Checks, per mode M: contract-M-<case> (the outcome the contract asks for, IPv4),
# contract-M-v6-<case> (the same over IPv6), then modes-agree (per family, the
# outcomes of the modes, distribution aside, are identical). Prints PASS:/
# FAIL:/SKIP: lines; exit 0 all passed, 1 any failed, 77 cannot run here.
# Env: VIPD_BUILD_DIR (default build), CONTRACT_MODES (default "dpdk iptables nftables ipvs"),
# CONTRACT_V6_MODES (the modes that also run the IPv6 cases; default all four modes).
set -uo pipefail
NAME=contract_test
MODES=(${CONTRACT_MODES:-dpdk iptables nftables ipvs})
# Set but empty: no mode runs the IPv6 cases.
V6_MODES=(${CONTRACT_V6_MODES-dpdk iptables nftables ipvs})
CASES=(db-tcp db-udp empty-tcp empty-udp affinity fallback other-port removal)
runs_v6() { local m; for m in "${V6_MODES[@]}"; do [ "$m" = "$1" ] && return 0; done; return 1; }
# Why a mode outside CONTRACT_V6_MODES gets no IPv6 requests.
v6_skip_why() {
  case $1 in
    dpdk) echo "IPv6 is not run for dpdk mode: its dataplane does not forward IPv6 yet (FamilyGate drops the IPv6 entries before it); add dpdk to CONTRACT_V6_MODES once it does" ;;
    ipvs) echo "IPv6 is not run for ipvs mode: it does not program IPv6 yet (FamilyGate drops the IPv6 entries before it); add ipvs to CONTRACT_V6_MODES once it does" ;;
    *) echo "IPv6 is not run for $1 mode: not in CONTRACT_V6_MODES ('${V6_MODES[*]}')" ;;
  esac
}
CHECKS=()
for m in "${MODES[@]}"; do
  for c in "${CASES[@]}"; do CHECKS+=("contract-$m-$c"); done
  if runs_v6 "$m"; then for c in "${CASES[@]}"; do CHECKS+=("contract-$m-v6-$c"); done
  else CHECKS+=("contract-$m-v6"); fi
done
CHECKS+=(modes-agree)
SKIP_HINT="run as root on a kernel with network namespaces, veth, bridge and netfilter"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
require_vipd

export LAB_PREFIX="vc$$-"
# Every lab is dual-stack (client fd00:10::2, pods fd00:244::/64, VIPs fd00:96::/112),
# whichever modes run the IPv6 cases: the manifests are the same for all.
export LAB_IPV6=1
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-contract.XXXXXX)
lib_traps

# The outcome the contract asks for (contract_scenario.sh's keys -> value).
EXPECTED='{"db_tcp": ["pod1", "pod2", "pod3"], "db_udp": ["pod1", "pod2", "pod3"],
  "empty_tcp": "refused", "empty_udp": "refused", "sticky_pods": 1, "fallback": ["pod2"],
  "other_port": "not-forwarded", "db_after_removal": ["pod2", "pod3"]}'

# Judges one mode's outcome: a PASS/FAIL line per case (LABEL: "dpdk", "dpdk-v6").
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

# dpdk mode's IPv6 side of the lab: the ports' IPv6 addresses (c0 fd00:10::1, p0
# fd00:244::1) and, where this vipd has the option, an IPv6 fnat local address.
DPDK_V6_ARGS=(--port-ipv6 fd00:10::1,fd00:244::1)
grep -q -- '--fnat-local-addrs6' <<<"$("$VIPD" --help 2>&1)" && DPDK_V6_ARGS+=(--fnat-local-addrs6 fd00:244::ff:1)

start_mode() {
  local mode=$1 eal
  case $mode in
    dpdk)
      eal=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' config/demo/vipd.conf | tail -n 1)
      ip netns exec "${P}lb" "$VIPD" --config config/demo/vipd.conf --forward-method fnat "${DPDK_V6_ARGS[@]}" \
        --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
        "--eal-args=$eal --file-prefix ${P}vipd" </dev/null >>"$TMP/vipd.log" 2>&1 & ;;
    iptables|nftables)
      lab_kernel_lb
      kernel_start_vipd "$mode" fnat ;;
  esac
  [ "$mode" = dpdk ] && VIPD_PID=$!
  wait_generation 1
}

declare -A OUT OUT6
for mode in "${MODES[@]}"; do
  t0=$(date +%s)
  v6=0; if runs_v6 "$mode"; then v6=1; else skip "contract-$mode-v6" "$(v6_skip_why "$mode")"; fi
  out6=
  if [ "$mode" = ipvs ]; then
    # The guest side lives with the IPVS test (it needs the guest's kernel).
    if [ ! -x tests/integration/ipvs_contract.sh ]; then
      for c in "${CASES[@]}"; do skip "contract-ipvs-$c" "tests/integration/ipvs_contract.sh is not there"; done
      [ "$v6" = 0 ] || for c in "${CASES[@]}"; do skip "contract-ipvs-v6-$c" "tests/integration/ipvs_contract.sh is not there"; done
      continue
    fi
    # One outcome line per family: IPv4, then IPv6 with CONTRACT_FAMILIES="4 6".
    both=$(CONTRACT_FAMILIES="4$([ "$v6" = 0 ] || echo " 6")" bash tests/integration/ipvs_contract.sh 2>"$TMP/ipvs.err"); rc=$?
    if [ "$rc" -eq 77 ]; then
      why=$(grep -m1 -o 'SKIPPED: .*' "$TMP/ipvs.err" || tail -n 1 "$TMP/ipvs.err")
      for c in "${CASES[@]}"; do skip "contract-ipvs-$c" "the IPVS guest cannot run here: ${why:-exit 77}"; done
      [ "$v6" = 0 ] || for c in "${CASES[@]}"; do skip "contract-ipvs-v6-$c" "the IPVS guest cannot run here: ${why:-exit 77}"; done
      continue
    fi
    [ "$rc" -eq 0 ] || note "ipvs_contract.sh exited with $rc: $(tail -n 3 "$TMP/ipvs.err" | tr '\n' ' ')"
    out=$(sed -n 1p <<<"$both")
    [ "$v6" = 0 ] || out6=$(sed -n 2p <<<"$both")
  else
    fresh_lab
    : >"$TMP/vipd.log"
    if ! start_mode "$mode"; then
      why="vipd ($mode) did not apply a table: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
      for c in "${CASES[@]}"; do fail "contract-$mode-$c" "$why"; done
      [ "$v6" = 0 ] || for c in "${CASES[@]}"; do fail "contract-$mode-v6-$c" "$why"; done
      stop_pid "$VIPD_PID"; VIPD_PID=
      continue
    fi
    out=$(P=$P bash tests/integration/contract_scenario.sh "$TMP/manifests" 4)
    # Same lab, same vipd: the IPv6 clusterIPs (the IPv4 removal left db's IPv6 slice alone).
    [ "$v6" = 0 ] || out6=$(P=$P bash tests/integration/contract_scenario.sh "$TMP/manifests" 6)
    stop_pid "$VIPD_PID"; VIPD_PID=
  fi
  note "$mode: $out"
  OUT[$mode]=$out
  judge_mode "$mode" "$out"
  if [ "$v6" = 1 ]; then
    note "$mode IPv6: $out6"
    OUT6[$mode]=$out6
    judge_mode "$mode-v6" "$out6"
    grep -q '"db_tcp": \["FAILED"\]' <<<"$out6" &&
      note "$mode mode answered no IPv6 request to db (IPv6 not forwarded?): see its log for the IPv6 entries it skipped"
  fi
  note "$mode: $(( $(date +%s) - t0 )) s ($([ "$v6" = 1 ] && echo "IPv4 and IPv6" || echo "IPv4 only"))"
done

# Same outcome in every mode that ran, per family (the contract, not the
# mechanism: timings and the spread over pods are left out).
args=()
for m in "${!OUT[@]}"; do args+=(4 "$m" "${OUT[$m]}"); done
for m in "${!OUT6[@]}"; do args+=(6 "$m" "${OUT6[$m]}"); done
ran4="${!OUT[*]}" ran6="${!OUT6[*]}"
if [ "${#OUT[@]}" -lt 2 ] && [ "${#OUT6[@]}" -lt 2 ]; then
  skip modes-agree "fewer than two modes produced an outcome in either family (IPv4: ${ran4:-none}; IPv6: ${ran6:-none})"
else
  d=$("$PYTHON" - "${args[@]}" <<'PY'
import json, sys
a = sys.argv[1:]
fams = {}
for i in range(0, len(a), 3):
    try:
        o = json.loads(a[i + 2])
    except ValueError:
        o = {"error": "no outcome"}
    o.pop("info", None)
    fams.setdefault(a[i], {})[a[i + 1]] = o
diffs = []
for fam, outs in sorted(fams.items()):
    first = next(iter(outs))
    for m, o in outs.items():
        for k in sorted(set(o) | set(outs[first])):
            if o.get(k) != outs[first].get(k):
                diffs.append("IPv%s %s: %s=%s, %s=%s" % (fam, k, first, json.dumps(outs[first].get(k)), m, json.dumps(o.get(k))))
print("; ".join(diffs))
PY
)
  if [ -z "$d" ]; then pass modes-agree; else fail modes-agree "$d"; fi
  note "modes compared: IPv4: ${ran4:-none}; IPv6: ${ran6:-none}$([ "${#OUT6[@]}" -ge 2 ] || echo " (IPv6 not compared: fewer than two modes)")"
fi
