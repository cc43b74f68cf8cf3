#!/usr/bin/env bash
# usage: tests/integration/iptables_test.sh fnat|nat
# variants: fnat nat
#
# vipd in `mode = iptables` (no DPDK) inside the lb namespace of a private lab
# (scripts/lab.sh, unique LAB_PREFIX). After `lab.sh up` the test gives the lb
# namespace kernel addresses (c0 10.0.0.1/24, p0 10.244.0.1/16), IPv4
# forwarding (sysctl inside that namespace only) and a dummy interface svc0 that
# the service range 10.96.0.0/12 is routed to, so traffic to a VIP that no rule
# DNATs goes nowhere (and only vipd's filter rules can answer "refused"). All
# iptables commands run inside the lb namespace; the root namespace gets no
# address, route or rule.
#
# Checks: the seed scenario (VIP 10.96.0.100:8080 -> 4 pods, spread; pod4 removed
# from the EndpointSlice while requests run: none fails, pod4 never reached
# again, its chain deleted), no endpoints -> connection refused (TCP and UDP,
# counted by the REJECT rule), UDP, sessionAffinity ClientIP, masquerade per
# forward method (fnat: pods see 10.244.0.1; nat: the client's 10.0.0.2), jump
# rules present exactly once, a vipd restart without a failed request, vipctl.
# IPv6 in the same lab (LAB_IPV6=1; ip6tables-restore, kube-proxy's IPv6 layout):
# db6 fd00:96::100 (TCP 8080, UDP 9053) in front of the four pods' IPv6
# addresses (EndpointSlice addressType IPv6): spread, pod4 removed while
# requests run (none fails; the time until ip6tables no longer names it is
# reported), no endpoints (empty6 fd00:96::101) -> refused by the REJECT rule
# (ICMPv6 port unreachable), UDP, the dry run's IPv6 payload, jumps once in
# ip6tables, and the restart keeping the IPv6 chains. Without ip6tables nat in a
# namespace the v6- checks SKIP (loudly) and the IPv4 ones still run.
# Each check prints "PASS: <name>" or "FAIL: <name>: <detail>"; exit status 0
# if all passed, 1 if any failed, 2 on usage errors, 77 (with SKIP lines) when
# it cannot run here (not root, no namespaces, no netfilter in namespaces).
# Env: VIPD_BIN / VIPCTL_BIN (default $VIPD_BUILD_DIR/vipd, VIPD_BUILD_DIR
# defaults to build).
set -uo pipefail

METHOD=${1:-}
case $METHOD in
  fnat|nat) ;;
  *) echo "usage: tests/integration/iptables_test.sh fnat|nat" >&2; exit 2 ;;
esac
NAME="iptables_test($METHOD)"

# ---- can we run here? ---------------------------------------------------------
CHECKS=(vipd-starts mode-reported dry-run-payload jump-rules-once http-four-pods masquerade change-applied
        removal-no-failures removed-pod-never-reached stale-chain-deleted no-endpoints-refused
        udp-no-endpoints-refused udp-roundtrip affinity restart-no-window vipctl-list vipctl-stats
        vipctl-explain-refused healthz vipd-alive
        v6-dry-run-payload v6-jump-rules-once v6-http-four-pods v6-removal-no-failures v6-removed-pod-never-reached
        v6-no-endpoints-refused v6-udp-no-endpoints-refused v6-udp-roundtrip)
V6_CHECKS=("${CHECKS[@]:20}")
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ "$(id -u)" -eq 0 ] || skip_all "not root (network namespaces and netfilter need root)"
command -v ip >/dev/null 2>&1 || skip_all "'ip' (iproute2) not installed"
for t in iptables iptables-restore iptables-save; do
  command -v "$t" >/dev/null 2>&1 || skip_all "'$t' not installed (Debian package iptables; scripts/bootstrap.sh)"
done
probe="vipd-iptprobe-$$"
ip netns add "$probe" 2>/dev/null || skip_all "cannot create network namespaces"
# Everything the payload uses, once, in a throw-away namespace.
probe_out=$(ip netns exec "$probe" iptables-restore --noflush -w 5 2>&1 <<'EOF'
*filter
:VIPD-PROBE - [0:0]
-A VIPD-PROBE -m conntrack --ctstate NEW -m comment --comment "probe" -d 10.96.0.1/32 -p tcp -m tcp --dport 1 -j REJECT
COMMIT
*nat
:VIPD-PROBE - [0:0]
-A VIPD-PROBE -m recent --name VIPD-PROBE --rcheck --seconds 10 --reap -j RETURN
-A VIPD-PROBE -m statistic --mode random --probability 0.5000000000 -j MARK --or-mark 0x4000
-A VIPD-PROBE -m mark ! --mark 0x4000/0x4000 -j RETURN
-A VIPD-PROBE -m recent --name VIPD-PROBE --set -p tcp -m tcp -j DNAT --to-destination 10.244.1.1:80
-A VIPD-PROBE -j MASQUERADE
COMMIT
EOF
)
probe_rc=$?
# The same for IPv6 (ip6table_nat and friends); without it only the v6- checks skip.
V6_SKIP=
if ! command -v ip6tables-restore >/dev/null 2>&1 || ! command -v ip6tables-save >/dev/null 2>&1; then
  V6_SKIP="'ip6tables-restore' / 'ip6tables-save' not installed (Debian package iptables)"
elif ! probe6_out=$(ip netns exec "$probe" ip6tables-restore --noflush -w 5 2>&1 <<'EOF'
*filter
:VIPD-PROBE - [0:0]
-A VIPD-PROBE -m conntrack --ctstate NEW -m comment --comment "probe" -d fd00:96::1/128 -p tcp -m tcp --dport 1 -j REJECT --reject-with icmp6-port-unreachable
COMMIT
*nat
:VIPD-PROBE - [0:0]
-A VIPD-PROBE -m recent --name VIPD-PROBE --rcheck --seconds 10 --reap -j RETURN
-A VIPD-PROBE -m statistic --mode random --probability 0.5000000000 -j MARK --or-mark 0x4000
-A VIPD-PROBE -m mark ! --mark 0x4000/0x4000 -j RETURN
-A VIPD-PROBE -m recent --name VIPD-PROBE --set -p tcp -m tcp -j DNAT --to-destination [fd00:244::1]:80
-A VIPD-PROBE -j MASQUERADE
COMMIT
EOF
); then
  V6_SKIP="ip6tables nat (ip6table_nat, statistic, recent, REJECT) not usable in a namespace: $(tr '\n' ' ' <<<"$probe6_out")"
fi
ip netns del "$probe"
[ "$probe_rc" -eq 0 ] || skip_all "netfilter (nat, statistic, recent, conntrack, REJECT) not usable in a namespace: $(tr '\n' ' ' <<<"$probe_out")"
v6() { [ "$LAB_IPV6" = 1 ]; }

require_vipd

export LAB_PREFIX="vi${METHOD:0:1}$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d "/tmp/vipd-iptables-$METHOD.XXXXXX")
BG_PIDS=()

cleanup_extra() {
  local p
  if [ "$NFAIL" -gt 0 ]; then
    note "---- iptables-save -t nat in ${P}lb (VIPD- lines) ----"
    ip netns exec "${P}lb" iptables-save -t nat 2>/dev/null | grep -E 'VIPD-' | head -n 40 | sed 's/^/    | /'
    if v6; then
      note "---- ip6tables-save -t nat in ${P}lb (VIPD- lines) ----"
      ip netns exec "${P}lb" ip6tables-save -t nat 2>/dev/null | grep -E 'VIPD-' | head -n 40 | sed 's/^/    | /'
    fi
  fi
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  return 0   # lib_cleanup stops vipd; deleting the namespace removes its rules too
}
stop_vipd() { stop_pid "$VIPD_PID"; VIPD_PID=; }
lib_traps

write_slice() { kernel_write_slice "$@"; }
start_vipd() { kernel_start_vipd iptables "$METHOD"; }
wait_synced() { kernel_wait_synced; }

# ---- lab, kernel forwarding in lb, vipd ------------------------------------------
kernel_seed_manifests

# IPv6 Services (single-stack IPv6) and their EndpointSlice (addressType IPv6).
POD6=(fd00:244::1:15 fd00:244::2:88 fd00:244::3:12 fd00:244::3:44)
write_slice6() {
  local file=$1 a
  shift
  {
    echo "apiVersion: discovery.k8s.io/v1"
    echo "kind: EndpointSlice"
    echo "metadata: {name: db6-1, namespace: default, labels: {kubernetes.io/service-name: db6}}"
    echo "addressType: IPv6"
    echo "ports: [{name: http, port: 8080, protocol: TCP}, {name: dns, port: 9053, protocol: UDP}]"
    echo "endpoints:"
    for a in "$@"; do echo "  - {addresses: [\"$a\"], conditions: {ready: true}}"; done
  } >"$file"
}
if [ -z "$V6_SKIP" ]; then
  cat >"$TMP/manifests/service6.yaml" <<'EOF_V6'
apiVersion: v1
kind: Service
metadata: {name: db6, namespace: default}
spec:
  type: ClusterIP
  clusterIP: fd00:96::100
  clusterIPs: [fd00:96::100]
  ipFamilies: [IPv6]
  ipFamilyPolicy: SingleStack
  ports: [{name: http, port: 8080, protocol: TCP}, {name: dns, port: 9053, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: empty6, namespace: default}
spec:
  type: ClusterIP
  clusterIP: fd00:96::101
  clusterIPs: [fd00:96::101]
  ipFamilies: [IPv6]
  ipFamilyPolicy: SingleStack
  ports: [{name: http, port: 80, protocol: TCP}, {name: dns, port: 53, protocol: UDP}]
EOF_V6
  write_slice6 "$TMP/manifests/endpointslice-db6.yaml" "${POD6[@]}"
  # The IPv6 checks need a vipd whose sources turn these into IPv6 entries.
  if ! "$VIPD" --dry-run --manifests-dir "$TMP/manifests" 2>/dev/null | grep -q '"vip":"fd00:96::100"'; then
    V6_SKIP="this vipd's sources give no IPv6 ServiceTable entry for an IPv6 Service (IPv6 ignored)"
    rm -f "$TMP/manifests/service6.yaml" "$TMP/manifests/endpointslice-db6.yaml"
  fi
fi
if [ -n "$V6_SKIP" ]; then
  export LAB_IPV6=0
  for c in "${V6_CHECKS[@]}"; do skip "$c" "$V6_SKIP"; done
else
  export LAB_IPV6=1
fi
lab_up
lab_kernel_lb


start_vipd
t0=$(date +%s%N)
if gen=$(wait_synced); then
  pass vipd-starts
  note "generation $gen after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
else
  if vipd_alive; then
    fail vipd-starts "no successful sync within 30 s: $(status_json | head -c 400)"
  else
    fail vipd-starts "vipd exited during start-up: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
  fi
  exit 1
fi
st=$(status_json)
if [ "$(json_field "$st" mode)" = iptables ] && [ "$(json_field "$st" forward_method)" = "$METHOD" ]; then
  pass mode-reported
else
  fail mode-reported "status: $(head -c 300 <<<"$st")"
fi

# The dry-run payload is the rule set vipd applied: every chain it declares
# exists in the kernel, and iptables-restore --test accepts it.
if "$VIPD" --mode iptables --dry-run --forward-method "$METHOD" --manifests-dir "$TMP/manifests" \
     >"$TMP/dry.all" 2>"$TMP/dry.err"; then
  # Two payloads when there are IPv6 entries: iptables-restore's, then ip6tables-restore's.
  awk -v f4="$TMP/dry.rules" -v f6="$TMP/dry6.rules" \
    '/^# vipd iptables mode: full ip6tables-restore/ {v6 = 1} {print > (v6 ? f6 : f4)}' "$TMP/dry.all"
  # (saved once per table: `iptables-save | grep -q` would fail under pipefail
  # whenever grep exits before iptables-save has written everything)
  missing=$(for t in filter nat; do
    saved=$(inlb iptables-save -t "$t")
    sed -n "/^\*$t\$/,/^COMMIT/s/^:\(VIPD-[^ ]*\) .*/\1/p" "$TMP/dry.rules" | while read -r c; do
      grep -q "^:$c " <<<"$saved" || echo "$t/$c"
    done
  done | tr '\n' ' ')
  nchains=$(grep -c '^:VIPD-' "$TMP/dry.rules")
  if [ -z "$missing" ] && [ "$nchains" -ge 10 ] && inlb iptables-restore --test --noflush -w 5 <"$TMP/dry.rules" 2>"$TMP/dry.test"; then
    pass dry-run-payload
  else
    fail dry-run-payload "$nchains chains; missing in the kernel: '${missing}'; --test: $(head -c 200 "$TMP/dry.test")"
  fi
else
  fail dry-run-payload "vipd --dry-run --mode iptables failed: $(head -c 300 "$TMP/dry.err")"
fi

if v6; then
  if [ -s "$TMP/dry6.rules" ]; then
    missing=$(for t in filter nat; do
      saved=$(inlb ip6tables-save -t "$t")
      sed -n "/^\*$t\$/,/^COMMIT/s/^:\(VIPD-[^ ]*\) .*/\1/p" "$TMP/dry6.rules" | while read -r c; do
        grep -q "^:$c " <<<"$saved" || echo "$t/$c"
      done
    done | tr '\n' ' ')
    if [ -z "$missing" ] && grep -q -- '-d fd00:96::100/128 -p tcp -m tcp --dport 8080 -j VIPD-SVC-' "$TMP/dry6.rules" &&
       grep -q -- '--to-destination \[fd00:244::3:44\]:8080' "$TMP/dry6.rules" &&
       grep -q -- '-d fd00:96::101/128 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp6-port-unreachable' "$TMP/dry6.rules" &&
       ! grep -q -- ' -d 10\.' "$TMP/dry6.rules" && ! grep -q 'fd00:' "$TMP/dry.rules" &&
       inlb ip6tables-restore --test --noflush -w 5 <"$TMP/dry6.rules" 2>"$TMP/dry6.test"; then
      pass v6-dry-run-payload
    else
      fail v6-dry-run-payload "missing in ip6tables: '${missing}'; --test: $(head -c 200 "$TMP/dry6.test" 2>/dev/null); $(grep -c . "$TMP/dry6.rules") lines"
    fi
  else
    fail v6-dry-run-payload "the dry run has no ip6tables-restore payload: $(head -c 300 "$TMP/dry.err")"
  fi
fi

# Exactly one jump per builtin chain (kube-proxy layout, docs/contract.md C14).
jumps_ok() {
  local save d
  save=$(inlb "${1:-iptables}-save" 2>/dev/null)
  d=$("$PYTHON" - "$save" <<'PY'
import sys
lines = sys.argv[1].splitlines()
want = {("filter", "INPUT", "VIPD-SERVICES"): 1, ("filter", "FORWARD", "VIPD-SERVICES"): 1,
        ("filter", "OUTPUT", "VIPD-SERVICES"): 1, ("filter", "FORWARD", "VIPD-FIREWALL"): 1,
        ("nat", "PREROUTING", "VIPD-SERVICES"): 1, ("nat", "OUTPUT", "VIPD-SERVICES"): 1,
        ("nat", "POSTROUTING", "VIPD-POSTROUTING"): 1}
got = {k: 0 for k in want}
table = None
for l in lines:
    if l.startswith("*"):
        table = l[1:]
    parts = l.split()
    if len(parts) > 2 and parts[0] == "-A" and "-j" in parts:
        k = (table, parts[1], parts[parts.index("-j") + 1])
        if k in got:
            got[k] += 1
bad = ["%s/%s -> %s: %d" % (k + (got[k],)) for k in want if got[k] != want[k]]
print("; ".join(bad))
PY
)
  echo "$d"
}
d=$(jumps_ok)
if [ -z "$d" ]; then pass jump-rules-once; else fail jump-rules-once "$d"; fi
if v6; then
  d=$(jumps_ok ip6tables)
  if [ -z "$d" ]; then pass v6-jump-rules-once; else fail v6-jump-rules-once "$d"; fi
fi

# ---- 400 requests over 4 pods ------------------------------------------------------
r=$(client http http://10.96.0.100:8080/ --count 400 --timeout 2 --max-time 60)
note "4 pods: $r"
# Random distribution (p = 1/4 each): 400 requests give 100 +- 9 per pod; 40 is far out.
d=$(judge "$r" 'r["failed"] == 0 and all(n("pod%d" % i) >= 40 for i in range(1, 5))')
if [ -z "$d" ] && [ -n "$r" ]; then pass http-four-pods; else fail http-four-pods "want 0 failed and each pod >= 40: ${d:-no result}"; fi

# ---- masquerade: what the pods see as the peer --------------------------------------
client hold 10.96.0.100:8080 --conns 8 --go "$TMP/go-masq" --timeout 2 --max-time 30 >"$TMP/hold-masq.out" 2>&1 &
HOLD=$!
BG_PIDS+=("$HOLD")
for _ in $(seq 1 100); do grep -q '^open' "$TMP/hold-masq.out" 2>/dev/null && break; sleep 0.05; done
peers=$(for n in 1 2 3 4; do ip netns exec "${P}pod$n" ss -Htn state established '( sport = :8080 )' 2>/dev/null | awk '{print $NF}'; done | sed 's/:[0-9]*$//' | sort -u | tr '\n' ' ')
touch "$TMP/go-masq"
wait "$HOLD" 2>/dev/null
want_peer=$([ "$METHOD" = fnat ] && echo 10.244.0.1 || echo 10.0.0.2)
note "peer addresses seen by the pods: ${peers:-none}"
if [ "$peers" = "$want_peer " ]; then
  pass masquerade
else
  fail masquerade "pods saw peers '${peers:-none}'; want only $want_peer ($METHOD)"
fi

# ---- remove pod4 while requests run ----------------------------------------------
# db's endpoint chain for pod4 (sticky has its own, which must stay).
sep4=$(inlb iptables-save -t nat | grep -- '--to-destination 10.244.3.44:8080' | grep 'default/db:http' |
       sed -n 's/^-A \(VIPD-SEP-[A-Z2-7]*\) .*/\1/p' | head -n 1)
note "db's endpoint chain for pod4 before the change: ${sep4:-none}"
gen_before=$(generation_of "$(status_json)")
client http http://10.96.0.100:8080/ --count 300 --interval 0.01 --timeout 2 --max-time 60 >"$TMP/during.out" 2>&1 &
BGR=$!
BG_PIDS+=("$BGR")
sleep 0.5
write_slice db "$TMP/slice.new" 10.244.1.15 10.244.2.88 10.244.3.12
t_mv=$(date +%s%N)
replace_file "$TMP/manifests/endpointslice-db.yaml" "$TMP/slice.new"
gen_after=
for _ in $(seq 1 1000); do   # bounded: ~10 s
  g=$(generation_of "$(status_json)")
  if [ -n "$g" ] && [ -n "$gen_before" ] && [ "$g" -gt "$gen_before" ]; then gen_after=$g; break; fi
  sleep 0.01
done
# (iptables-save output is captured before grep -q reads it: under pipefail an
# early-exiting grep -q would make the pipeline fail through SIGPIPE)
nat_now=$(inlb iptables-save -t nat)
if [ -n "$gen_after" ] && ! grep -q -- "-A VIPD-SVC-.*default/db:http -> 10.244.3.44:8080" <<<"$nat_now"; then
  pass change-applied
  note "generation $gen_before -> $gen_after, visible after $(( ($(date +%s%N) - t_mv) / 1000000 )) ms"
else
  fail change-applied "generation '${gen_before:-?}' -> '${gen_after:-none}'; db's service chain still names pod4: $(inlb iptables-save -t nat | grep -c 'db:http -> 10.244.3.44')"
fi
wait "$BGR" 2>/dev/null
r=$(tail -n 1 "$TMP/during.out")
note "requests during the change: $r"
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 300')
if [ -z "$d" ]; then pass removal-no-failures; else fail removal-no-failures "want 300 ok, 0 failed: $d"; fi

r=$(client http http://10.96.0.100:8080/ --count 300 --timeout 2 --max-time 60)
note "pod4 removed: $r"
d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
if [ -z "$d" ] && [ -n "$r" ]; then pass removed-pod-never-reached; else fail removed-pod-never-reached "want 0 failed, none to pod4, pod1..pod3 > 0: ${d:-no result}"; fi

nat_now=$(inlb iptables-save -t nat)
if [ -n "$sep4" ] && ! grep -q -- "^:$sep4 " <<<"$nat_now" &&
   grep -q 'sticky:http -> 10.244.3.44:8080' <<<"$nat_now"; then
  pass stale-chain-deleted
else
  fail stale-chain-deleted "db's pod4 chain '${sep4:-not found before}' still declared, or sticky's pod4 rule was lost"
fi

# ---- no endpoints -> REJECT ---------------------------------------------------------
rej_count() { inlb iptables -w 5 -t filter -L VIPD-SERVICES -v -n -x 2>/dev/null | awk -v p="$1" '$3 == "REJECT" && $0 ~ p {s += $1} END {print s + 0}'; }
before=$(rej_count 'dpt:80 ')
out=$(client connect 10.96.0.101:80 --timeout 3)
after=$(rej_count 'dpt:80 ')
if [ "$out" = refused ] && [ "$after" -gt "$before" ]; then
  pass no-endpoints-refused
else
  fail no-endpoints-refused "connect 10.96.0.101:80 gave '$out' (want refused); REJECT rule counter $before -> $after"
fi
r=$(client udp 10.96.0.101:53 --count 3 --timeout 1 --max-time 10)
d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
if [ -z "$d" ] && [ -n "$r" ]; then pass udp-no-endpoints-refused; else fail udp-no-endpoints-refused "want 3 x ConnectionRefusedError: ${d:-no result}"; fi

# ---- UDP ------------------------------------------------------------------------
r=$(client udp 10.96.0.100:9053 --count 100 --timeout 1 --max-time 30)
note "udp: $r"
d=$(judge "$r" 'r["ok"] >= 95 and set(pods) <= {"pod1", "pod2", "pod3", "pod4"} and len(pods) >= 2')
if [ -z "$d" ] && [ -n "$r" ]; then pass udp-roundtrip; else fail udp-roundtrip "want >= 95 of 100 replies from >= 2 pods: ${d:-no result}"; fi

# ---- sessionAffinity ClientIP ---------------------------------------------------------
r=$(client http http://10.96.0.102:8080/ --count 60 --timeout 2 --max-time 30)
note "sticky service: $r"
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 60 and len(pods) == 1')
if [ -z "$d" ] && [ -n "$r" ]; then pass affinity; else fail affinity "want 60 answers from one pod: ${d:-no result}"; fi

# ---- IPv6: the seed scenario over ip6tables ------------------------------------------
if v6; then
  r=$(client http "http://[fd00:96::100]:8080/" --count 400 --timeout 2 --max-time 60)
  note "IPv6, 4 pods: $r"
  d=$(judge "$r" 'r["failed"] == 0 and all(n("pod%d" % i) >= 40 for i in range(1, 5))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-http-four-pods; else fail v6-http-four-pods "want 0 failed and each pod >= 40: ${d:-no result}"; fi

  had6=$(inlb ip6tables-save -t nat | grep -c -- "-A VIPD-SVC-.*default/db6:http -> \[fd00:244::3:44\]:8080")
  client http "http://[fd00:96::100]:8080/" --count 300 --interval 0.01 --timeout 2 --max-time 60 >"$TMP/during6.out" 2>&1 &
  BGR=$!
  BG_PIDS+=("$BGR")
  sleep 0.5
  write_slice6 "$TMP/slice6.new" "${POD6[@]:0:3}"
  t_mv=$(date +%s%N)
  replace_file "$TMP/manifests/endpointslice-db6.yaml" "$TMP/slice6.new"
  gone_ms=
  for _ in $(seq 1 1000); do   # bounded: ~10 s
    nat6=$(inlb ip6tables-save -t nat)
    if ! grep -q -- "-A VIPD-SVC-.*default/db6:http -> \[fd00:244::3:44\]:8080" <<<"$nat6"; then
      gone_ms=$(( ($(date +%s%N) - t_mv) / 1000000 )); break
    fi
    sleep 0.01
  done
  note "IPv6: change to kernel (pod4 gone from db6's ip6tables service chain): ${gone_ms:-not within 10 s} ms"
  wait "$BGR" 2>/dev/null
  r=$(tail -n 1 "$TMP/during6.out")
  note "IPv6 requests during the change: $r"
  d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 300')
  if [ "$had6" -ge 1 ] && [ -n "$gone_ms" ] && [ -z "$d" ]; then pass v6-removal-no-failures
  else fail v6-removal-no-failures "want pod4's rule in db6's chain before ($had6), gone within 10 s after (${gone_ms:-not gone}), 300 ok, 0 failed: $d"; fi

  r=$(client http "http://[fd00:96::100]:8080/" --count 300 --timeout 2 --max-time 60)
  d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-removed-pod-never-reached; else fail v6-removed-pod-never-reached "want 0 failed, none to pod4, pod1..pod3 > 0: ${d:-no result}"; fi

  rej6_count() { inlb ip6tables -w 5 -t filter -L VIPD-SERVICES -v -n -x 2>/dev/null | awk -v p="$1" '$3 == "REJECT" && $0 ~ p {s += $1} END {print s + 0}'; }
  before=$(rej6_count 'dpt:80 ')
  out=$(client connect "[fd00:96::101]:80" --timeout 3)
  after=$(rej6_count 'dpt:80 ')
  if [ "$out" = refused ] && [ "$after" -gt "$before" ]; then
    pass v6-no-endpoints-refused
  else
    fail v6-no-endpoints-refused "connect [fd00:96::101]:80 gave '$out' (want refused); REJECT rule counter $before -> $after"
  fi
  r=$(client udp "[fd00:96::101]:53" --count 3 --timeout 1 --max-time 10)
  d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-udp-no-endpoints-refused; else fail v6-udp-no-endpoints-refused "want 3 x ConnectionRefusedError: ${d:-no result}"; fi
  r=$(client udp "[fd00:96::100]:9053" --count 100 --timeout 1 --max-time 30)
  note "IPv6 udp: $r"
  d=$(judge "$r" 'r["ok"] >= 95 and set(pods) <= {"pod1", "pod2", "pod3"} and len(pods) >= 2')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-udp-roundtrip; else fail v6-udp-roundtrip "want >= 95 of 100 replies from >= 2 of pod1..pod3: ${d:-no result}"; fi
fi

# ---- restart: rules stay, traffic never stops -------------------------------------
chains_before=$(inlb iptables-save -t nat | grep -c '^:VIPD-')
chains6_before=$(v6 && inlb ip6tables-save -t nat | grep -c '^:VIPD-')
client http http://10.96.0.100:8080/ --count 400 --interval 0.01 --timeout 2 --max-time 60 >"$TMP/restart.out" 2>&1 &
BGR=$!
BG_PIDS+=("$BGR")
sleep 0.3
stop_vipd
down_rules=$(inlb iptables-save -t nat | grep -c '^-A VIPD-SERVICES ')
sleep 0.5
start_vipd
gen=$(wait_synced) || gen=
wait "$BGR" 2>/dev/null
r=$(tail -n 1 "$TMP/restart.out")
chains_after=$(inlb iptables-save -t nat | grep -c '^:VIPD-')
chains6_after=$(v6 && inlb ip6tables-save -t nat | grep -c '^:VIPD-')
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 400 and n("pod4") == 0')
j=$(jumps_ok)
v6 && j+=$(jumps_ok ip6tables)
note "restart: requests $r; nat VIPD- chains $chains_before -> $chains_after (IPv6: ${chains6_before:-n/a} -> ${chains6_after:-n/a}); VIPD-SERVICES rules while down: $down_rules"
if [ -n "$gen" ] && [ -z "$d" ] && [ -z "$j" ] && [ "$down_rules" -ge 2 ] && [ "$chains_after" -eq "$chains_before" ] &&
   [ "$chains6_after" = "$chains6_before" ]; then
  pass restart-no-window
else
  fail restart-no-window "resynced: '${gen:-no}'; requests: ${d:-ok}; jumps: ${j:-ok}; rules while down: $down_rules; chains $chains_before -> $chains_after (IPv6 ${chains6_before:-n/a} -> ${chains6_after:-n/a})"
fi

# ---- vipctl, health ---------------------------------------------------------------
if out=$(vipctl list 2>&1) && grep -q '10\.96\.0\.100:8080' <<<"$out" && ! grep -q '10\.244\.3\.44:8080' <<<"$(grep -A5 '10.96.0.100:8080' <<<"$out")"; then
  pass vipctl-list
else
  fail vipctl-list "$(head -c 400 <<<"$out" | tr '\n' ' ')"
fi
if out=$(vipctl stats --json 2>&1) && [ "$(json_field "$out" stats_available)" = False ] && [ -n "$(json_field "$out" note)" ] &&
   text=$(vipctl stats 2>&1) && grep -q 'iptables mode' <<<"$text"; then
  pass vipctl-stats
else
  fail vipctl-stats "want a document saying stats are not available: $(head -c 300 <<<"$out${text:+ / $text}" | tr '\n' ' ')"
fi
if out=$(vipctl explain tcp 10.0.0.2:40000 10.96.0.100:8080 2>&1); then
  fail vipctl-explain-refused "explain succeeded in iptables mode: $(head -c 200 <<<"$out")"
elif grep -q 'needs the dpdk dataplane' <<<"$out"; then
  pass vipctl-explain-refused
else
  fail vipctl-explain-refused "want a clear refusal: $(head -c 300 <<<"$out" | tr '\n' ' ')"
fi
h=$(inlb "$PYTHON" -c 'import urllib.request,sys
try:
    r = urllib.request.urlopen("http://127.0.0.1:10256/healthz", timeout=3); print(r.status, r.read().decode()[:200])
except Exception as e:
    print("error", e)' 2>&1)
if [[ $h == 200* ]]; then pass healthz; else fail healthz "GET /healthz in ${P}lb: $h"; fi

if vipd_alive && status_json >/dev/null; then
  pass vipd-alive
else
  fail vipd-alive "vipd is not running or not answering at the end of the test"
fi
