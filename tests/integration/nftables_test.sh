#!/usr/bin/env bash
# usage: tests/integration/nftables_test.sh fnat|nat
# variants: fnat nat
#
# vipd in `mode = nftables` (no DPDK) inside the lb namespace of a private lab
# (scripts/lab.sh), set up like iptables_test.sh (lib.sh: lab_kernel_lb,
# kernel_seed_manifests): kernel addresses, forwarding in that namespace only,
# the service range routed to a dummy svc0 so that only vipd's table can
# answer "refused". All nft commands run inside the lb namespace.
#
# Checks: the seed scenario (VIP 10.96.0.100:8080 -> 4 pods, spread; pod4 removed
# while requests run: none fails, pod4 never reached again, its chain deleted
# (nat; fnat renders the compact form: no endpoint chains, endpoint-layout),
# and the change was a partial sync sent as a libnftnl netlink batch), the dry-run transaction accepted by
# `nft -c -f` and equal to what the kernel holds, no endpoints -> refused (TCP,
# UDP), another port of a ClusterIP -> refused, UDP, sessionAffinity ClientIP,
# masquerade per forward method, a restart (with a service deleted while vipd
# was down) that leaves no stale chain or set and fails no request, vipctl, and
# a table ip6 vipd left by an earlier run (IPv6 entries) deleted by the first
# full sync.
# IPv6 in the same lab (LAB_IPV6=1; lib.sh kernel_v6_manifests): db6
# fd00:96::100 (TCP 8080, UDP 9053) in front of the four pods' IPv6 addresses,
# rendered into table ip6 vipd: the dry run's ip6 objects equal to the kernel's,
# spread, pod4 removed while requests run (none fails; the time until the ip6
# table no longer names it is reported), empty6 fd00:96::101 -> refused (TCP,
# UDP: ICMPv6 port unreachable), UDP, and the restart (empty6 deleted while vipd
# was down) leaving no stale ip6 object. Without ip6 nat in a namespace the v6-
# checks SKIP (loudly) and the IPv4 ones still run.
# Each check prints "PASS: <name>" or "FAIL: <name>: <detail>"; exit status 0
# if all passed, 1 if any failed, 2 on usage errors, 77 (with SKIP lines) when
# it cannot run here. Env: VIPD_BUILD_DIR (default build), VIPD_BIN/VIPCTL_BIN.
set -uo pipefail

METHOD=${1:-}
case $METHOD in
  fnat|nat) ;;
  *) echo "usage: tests/integration/nftables_test.sh fnat|nat" >&2; exit 2 ;;
esac
NAME="nftables_test($METHOD)"

CHECKS=(vipd-starts mode-reported dry-run-accepted http-four-pods masquerade endpoint-layout change-applied one-change-partial change-as-netlink-batch
        removal-no-failures removed-pod-never-reached stale-chain-retired no-endpoints-refused
        udp-no-endpoints-refused other-port-refused udp-roundtrip affinity restart-no-stale vipctl-list
        vipctl-stats healthz vipd-alive stale-ip6-table-removed
        v6-dry-run-accepted v6-http-four-pods v6-removal-no-failures v6-removed-pod-never-reached
        v6-no-endpoints-refused v6-udp-no-endpoints-refused v6-udp-roundtrip v6-restart-no-stale)
V6_CHECKS=("${CHECKS[@]:22}")
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ "$(id -u)" -eq 0 ] || skip_all "not root (network namespaces and nf_tables need root)"
command -v ip >/dev/null 2>&1 || skip_all "'ip' (iproute2) not installed"
command -v nft >/dev/null 2>&1 || skip_all "'nft' not installed (Debian package nftables; scripts/bootstrap.sh)"
probe="vipd-nftprobe-$$"
ip netns add "$probe" 2>/dev/null || skip_all "cannot create network namespaces"
probe_out=$(ip netns exec "$probe" nft -f - 2>&1 <<'EOF'
table ip probe {
  set s { type ipv4_addr; flags dynamic,timeout; timeout 10s; }
  chain c { type nat hook prerouting priority -100; numgen random mod 2 vmap { 0 : goto d, 1 : goto d }; }
  chain d { update @s { ip saddr }; meta l4proto tcp dnat to 10.244.1.1:80; }
  chain r { type filter hook forward priority -10; ct state new ip daddr 10.96.0.1 reject; }
  chain m { type nat hook postrouting priority 100; masquerade fully-random; }
}
EOF
)
probe_rc=$?
# The same in an ip6 table; without it only the v6- checks skip.
V6_SKIP=
if ! probe6_out=$(ip netns exec "$probe" nft -f - 2>&1 <<'EOF'
table ip6 probe {
  set s { type ipv6_addr; flags dynamic,timeout; timeout 10s; }
  chain c { type nat hook prerouting priority -100; numgen random mod 2 vmap { 0 : goto d, 1 : goto d }; }
  chain d { update @s { ip6 saddr }; meta l4proto tcp dnat to [fd00:244::1]:80; }
  chain r { type filter hook forward priority -10; ct state new ip6 daddr fd00:96::1 reject; }
  chain m { type nat hook postrouting priority 100; masquerade fully-random; }
}
EOF
); then
  V6_SKIP="nf_tables ip6 nat (numgen, dynamic sets, reject, masquerade) not usable in a namespace: $(tr '\n' ' ' <<<"$probe6_out")"
fi
ip netns del "$probe"
[ "$probe_rc" -eq 0 ] || skip_all "nf_tables (nat, numgen, dynamic sets, reject, masquerade) not usable in a namespace: $(tr '\n' ' ' <<<"$probe_out")"

require_vipd

export LAB_PREFIX="vn${METHOD:0:1}$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d "/tmp/vipd-nftables-$METHOD.XXXXXX")
BG_PIDS=()

cleanup_extra() {
  local p
  if [ "$NFAIL" -gt 0 ]; then
    note "---- nft list table ip vipd in ${P}lb (first 60 lines) ----"
    inlb nft list table ip vipd 2>&1 | head -n 60 | sed 's/^/    | /'
    if v6; then
      note "---- nft list table ip6 vipd in ${P}lb (first 40 lines) ----"
      inlb nft list table ip6 vipd 2>&1 | head -n 40 | sed 's/^/    | /'
    fi
  fi
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  return 0   # lib_cleanup stops vipd; deleting the namespace removes the table too
}
stop_vipd() { stop_pid "$VIPD_PID"; VIPD_PID=; }
lib_traps

table_now() { inlb nft list table "${1:-ip}" vipd 2>/dev/null; }
v6() { [ "$LAB_IPV6" = 1 ]; }
# "chain NAME" / "set NAME" / "map NAME" per line, sorted: what a table listing
# or a transaction (FILE, table FAMILY vipd; default ip) declares.
objects_of_listing() { sed -n 's/^\t\(chain\|set\|map\) \([^ ]*\) {.*/\1 \2/p' | sort; }
objects_of_dry() {
  awk -v f="${2:-ip}" '/^table / {t = $2} /^}/ {t = ""}
    t == f && /^\t(chain|set|map) [^ ]* \{/ {print $1, $2}
    /^add (chain|set) / && $3 == f && $4 == "vipd" {print $2, $5}' "$1" | sort
}
# The chain whose rule contains TEXT (first), from a listing on stdin.
chain_with() { awk -v t="$1" '/^\tchain /{c=$2} index($0, t){print c; exit}'; }
nft_stat() { "$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["nftables"][sys.argv[2]])' "$1" "$2" 2>/dev/null; }

kernel_seed_manifests
if [ -z "$V6_SKIP" ]; then V6_SKIP=$(kernel_v6_manifests); fi
if [ -n "$V6_SKIP" ]; then
  export LAB_IPV6=0
  for c in "${V6_CHECKS[@]}"; do skip "$c" "$V6_SKIP"; done
else
  export LAB_IPV6=1
fi
lab_up
lab_kernel_lb

# A table ip6 vipd as an earlier run with IPv6 entries left it (the seed has
# none): vipd's first full sync must delete it.
stale6_out=$(inlb nft -f - 2>&1 <<'EOF'
table ip6 vipd {
  set aff-STALE6-300 { type ipv6_addr; flags dynamic,timeout; timeout 300s; }
  chain svc-STALE6 { meta l4proto tcp dnat to [fd00:244::1]:8080; }
  chain nat-prerouting { type nat hook prerouting priority -100; policy accept; ip6 daddr fd00:96::100 goto svc-STALE6; }
}
EOF
)
stale6_rc=$?

kernel_start_vipd nftables "$METHOD"
t0=$(date +%s%N)
if gen=$(kernel_wait_synced); then
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
if [ "$stale6_rc" -ne 0 ]; then
  skip stale-ip6-table-removed "could not create a table ip6 vipd in ${P}lb: $(tr '\n' ' ' <<<"$stale6_out" | head -c 200)"
elif ! inlb nft list table ip6 vipd >/dev/null 2>&1 || { v6 && ! grep -q STALE6 <<<"$(table_now ip6)"; }; then
  pass stale-ip6-table-removed   # (with IPv6 entries: replaced by vipd's own)
else
  fail stale-ip6-table-removed "table ip6 vipd of an earlier run still there after the first full sync: $(inlb nft list table ip6 vipd 2>&1 | head -c 300 | tr '\n' ' ')"
fi
st=$(status_json)
if [ "$(json_field "$st" mode)" = nftables ] && [ "$(json_field "$st" forward_method)" = "$METHOD" ] &&
   [ "$(nft_stat "$st" full_syncs)" = 1 ]; then
  pass mode-reported
else
  fail mode-reported "status: $(head -c 400 <<<"$st")"
fi

# The dry-run transaction is what vipd applied: nft -c accepts it, and it
# declares exactly the chains, sets and maps the kernel holds.
if "$VIPD" --mode nftables --dry-run --forward-method "$METHOD" --manifests-dir "$TMP/manifests" \
     >"$TMP/dry.nft" 2>"$TMP/dry.err"; then
  want=$(objects_of_dry "$TMP/dry.nft")
  got=$(table_now | objects_of_listing)
  n=$(wc -l <<<"$want")
  if [ "$want" = "$got" ] && [ "$n" -ge 20 ] && inlb nft -c -f "$TMP/dry.nft" 2>"$TMP/dry.test"; then
    pass dry-run-accepted
  else
    fail dry-run-accepted "$n objects; differ from the kernel: $(diff <(echo "$want") <(echo "$got") | head -n 6 | tr '\n' ' '); nft -c: $(head -c 200 "$TMP/dry.test")"
  fi
else
  fail dry-run-accepted "vipd --dry-run --mode nftables failed: $(head -c 300 "$TMP/dry.err")"
fi
# Its ip6 part: the objects of table ip6 vipd, db6 and empty6 in its maps, no
# IPv4 address in it, and nft -c accepting the whole transaction.
if v6; then
  want6=$(objects_of_dry "$TMP/dry.nft" ip6)
  got6=$(table_now ip6 | objects_of_listing)
  n6=$(wc -l <<<"$want6")
  ip6part=$(awk '/^table ip6 vipd/ {t = 1} /^}/ {t = 0} t || / ip6 vipd /' "$TMP/dry.nft")
  if [ "$want6" = "$got6" ] && [ "$n6" -ge 15 ] &&
     grep -q 'fd00:96::100 \. tcp \. 8080 : goto svc-' <<<"$ip6part" &&
     grep -q 'fd00:96::101 \. tcp \. 80 : goto reject-chain' <<<"$ip6part" &&
     grep -q 'fd00:244::3:44' <<<"$ip6part" && ! grep -q '10\.244\.' <<<"$ip6part" &&
     inlb nft -c -f "$TMP/dry.nft" 2>"$TMP/dry6.test"; then
    pass v6-dry-run-accepted
  else
    fail v6-dry-run-accepted "$n6 ip6 objects; differ from table ip6 vipd: $(diff <(echo "$want6") <(echo "$got6") | head -n 6 | tr '\n' ' '); nft -c: $(head -c 200 "$TMP/dry6.test")"
  fi
fi

# ---- 400 requests over 4 pods ------------------------------------------------------
r=$(client http http://10.96.0.100:8080/ --count 400 --timeout 2 --max-time 60)
note "4 pods: $r"
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
if [ "$peers" = "$want_peer " ]; then pass masquerade; else fail masquerade "pods saw peers '${peers:-none}'; want only $want_peer ($METHOD)"; fi

# ---- remove pod4 while requests run ----------------------------------------------
# fnat renders the compact form (db's service chain DNATs itself, one numgen
# rule per endpoint, no endpoint chains); nat has one chain per endpoint
# (hairpin marking). A rule that sends db:http to pod4, in either form:
DB_POD4='10\.244\.3\.44(:| \. )8080 .*comment "default/db:http'
sep4=$(table_now | chain_with 'dnat to 10.244.3.44:8080 comment "default/db:http')
[[ "$sep4" == sep-* ]] || sep4=  # an endpoint chain, not the compact service chain
note "db's endpoint chain for pod4 before the change: ${sep4:-none}"
if [ "$METHOD" = fnat ]; then
  if [ -z "$sep4" ] && grep -qE "$DB_POD4" <<<"$(table_now)"; then pass endpoint-layout
  else fail endpoint-layout "fnat: want db's pod4 in its service chain, no endpoint chain (found '${sep4:-none}')"; fi
elif [ -n "$sep4" ]; then pass endpoint-layout
else fail endpoint-layout "nat: want an endpoint chain that DNATs db:http to pod4"; fi
st=$(status_json)
gen_before=$(generation_of "$st")
partial_before=$(nft_stat "$st" partial_syncs)
st_before=$st
client http http://10.96.0.100:8080/ --count 300 --interval 0.01 --timeout 2 --max-time 60 >"$TMP/during.out" 2>&1 &
BGR=$!
BG_PIDS+=("$BGR")
sleep 0.5
kernel_write_slice db "$TMP/slice.new" 10.244.1.15 10.244.2.88 10.244.3.12
t_mv=$(date +%s%N)
replace_file "$TMP/manifests/endpointslice-db.yaml" "$TMP/slice.new"
gen_after=
for _ in $(seq 1 1000); do   # bounded: ~10 s
  g=$(generation_of "$(status_json)")
  if [ -n "$g" ] && [ -n "$gen_before" ] && [ "$g" -gt "$gen_before" ]; then gen_after=$g; break; fi
  sleep 0.01
done
now=$(table_now)
if [ -n "$gen_after" ] && ! grep -qE "$DB_POD4" <<<"$now"; then
  pass change-applied
  note "generation $gen_before -> $gen_after, visible after $(( ($(date +%s%N) - t_mv) / 1000000 )) ms"
else
  fail change-applied "generation '${gen_before:-?}' -> '${gen_after:-none}'; db still DNATs to pod4: $(grep -c 'db:http -> 10.244.3.44' <<<"$now")"
fi
# One partial sync: db's http and dns service chains rewritten, and (nat) pod4's
# two endpoint chains flushed and retired (deleted in bulk later, or by a full sync).
want_ret=$([ "$METHOD" = fnat ] && echo 0 || echo 2)
st=$(status_json)
p_after=$(nft_stat "$st" partial_syncs); cw=$(nft_stat "$st" chains_written); cret=$(nft_stat "$st" chains_retired)
fulls=$(nft_stat "$st" full_syncs)
if [ -n "$p_after" ] && [ "$p_after" -gt "${partial_before:-0}" ] && [ "$fulls" = 1 ] && [ "$cw" = 2 ] && [ "$cret" = "$want_ret" ]; then
  pass one-change-partial
else
  fail one-change-partial "partial syncs ${partial_before:-?} -> ${p_after:-?}, full $fulls, last: $cw chains written, $cret retired (want 2 and $want_ret)"
fi
# That change (fnat: two compact service chains rewritten; nat: two service
# chains and their endpoint chains) went as a libnftnl netlink batch, not
# through libnftables.
nl_before=$(nft_stat "$st_before" netlink_syncs); nl_after=$(nft_stat "$st" netlink_syncs)
want_nl=$(( ${nl_before:-0} + 1 ))
if [ -n "$nl_after" ] && [ "$nl_after" = "$want_nl" ]; then pass change-as-netlink-batch
else fail change-as-netlink-batch "netlink_syncs ${nl_before:-?} -> ${nl_after:-?} (want $want_nl)"; fi
wait "$BGR" 2>/dev/null
r=$(tail -n 1 "$TMP/during.out")
note "requests during the change: $r"
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 300')
if [ -z "$d" ]; then pass removal-no-failures; else fail removal-no-failures "want 300 ok, 0 failed: $d"; fi

r=$(client http http://10.96.0.100:8080/ --count 300 --timeout 2 --max-time 60)
d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
if [ -z "$d" ] && [ -n "$r" ]; then pass removed-pod-never-reached; else fail removed-pod-never-reached "want 0 failed, none to pod4, pod1..pod3 > 0: ${d:-no result}"; fi

# pod4's chain is empty now (nothing jumps to it); restart-no-stale below checks
# that a full sync leaves no such chain behind.
now=$(table_now)
rules4=$(awk -v c="$sep4" '$1 == "chain" && $2 == c {on = 1; next} on && /^\t}/ {exit} on && NF {print}' <<<"$now")
sticky4=$(grep -c 'dnat to 10.244.3.44:8080 comment "default/sticky:http' <<<"$now")
if [ "$METHOD" = fnat ]; then
  # compact: no endpoint chain to retire; no rule of db reaches pod4, sticky's
  # (affinity: endpoint chains) pod4 chain kept
  if [ -z "$sep4" ] && ! grep -qE "$DB_POD4" <<<"$now" && [ "$sticky4" -ge 1 ]; then
    pass stale-chain-retired
  else
    fail stale-chain-retired "db endpoint chain '${sep4:-}', db rules to pod4: $(grep -cE "$DB_POD4" <<<"$now"), sticky's pod4 rules: $sticky4"
  fi
elif [ -n "$sep4" ] && [ -z "$rules4" ] && [ "$sticky4" -ge 1 ]; then
  pass stale-chain-retired
else
  fail stale-chain-retired "db's pod4 chain '${sep4:-not found before}' still has rules ($(head -c 200 <<<"$rules4")), or sticky's pod4 chain was lost"
fi

# ---- no endpoints, other ports -> refused -------------------------------------------
out=$(client connect 10.96.0.101:80 --timeout 3)
if [ "$out" = refused ]; then pass no-endpoints-refused; else fail no-endpoints-refused "connect 10.96.0.101:80 gave '$out' (want refused)"; fi
r=$(client udp 10.96.0.101:53 --count 3 --timeout 1 --max-time 10)
d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
if [ -z "$d" ] && [ -n "$r" ]; then pass udp-no-endpoints-refused; else fail udp-no-endpoints-refused "want 3 x ConnectionRefusedError: ${d:-no result}"; fi
out=$(client connect 10.96.0.100:9999 --timeout 3)
if [ "$out" = refused ]; then pass other-port-refused; else fail other-port-refused "connect 10.96.0.100:9999 gave '$out' (want refused by cluster-ips-check)"; fi

# ---- UDP, affinity ------------------------------------------------------------------
r=$(client udp 10.96.0.100:9053 --count 100 --timeout 1 --max-time 30)
d=$(judge "$r" 'r["ok"] >= 95 and set(pods) <= {"pod1", "pod2", "pod3", "pod4"} and len(pods) >= 2')
if [ -z "$d" ] && [ -n "$r" ]; then pass udp-roundtrip; else fail udp-roundtrip "want >= 95 of 100 replies from >= 2 pods: ${d:-no result}"; fi
r=$(client http http://10.96.0.102:8080/ --count 60 --timeout 2 --max-time 30)
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 60 and len(pods) == 1')
if [ -z "$d" ] && [ -n "$r" ]; then pass affinity; else fail affinity "want 60 answers from one pod: ${d:-no result}"; fi

# ---- IPv6: the seed scenario in table ip6 vipd --------------------------------------
if v6; then
  r=$(client http "http://[fd00:96::100]:8080/" --count 400 --timeout 2 --max-time 60)
  note "IPv6, 4 pods: $r"
  d=$(judge "$r" 'r["failed"] == 0 and all(n("pod%d" % i) >= 40 for i in range(1, 5))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-http-four-pods; else fail v6-http-four-pods "want 0 failed and each pod >= 40: ${d:-no result}"; fi

  # pod4 in db6:http's rules (nat: its endpoint chain; fnat: the service chain's map)
  DB6_POD4='fd00:244::3:44(\]:| \. )8080 .*comment "default/db6:http'
  had6=$(table_now ip6 | grep -cE "$DB6_POD4")
  client http "http://[fd00:96::100]:8080/" --count 300 --interval 0.01 --timeout 2 --max-time 60 >"$TMP/during6.out" 2>&1 &
  BGR=$!
  BG_PIDS+=("$BGR")
  sleep 0.5
  kernel_write_slice6 "$TMP/slice6.new" "${KERNEL_POD6[@]:0:3}"
  t_mv=$(date +%s%N)
  replace_file "$TMP/manifests/endpointslice-db6.yaml" "$TMP/slice6.new"
  gone_ms=
  for _ in $(seq 1 1000); do   # bounded: 1000 listings
    now6=$(table_now ip6)
    if ! grep -qE "$DB6_POD4" <<<"$now6"; then gone_ms=$(( ($(date +%s%N) - t_mv) / 1000000 )); break; fi
    sleep 0.01
  done
  note "IPv6: change to kernel (pod4 gone from db6's rules in table ip6 vipd): ${gone_ms:-never} ms"
  wait "$BGR" 2>/dev/null
  r=$(tail -n 1 "$TMP/during6.out")
  note "IPv6 requests during the change: $r"
  d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 300')
  if [ "$had6" -ge 1 ] && [ -n "$gone_ms" ] && [ -z "$d" ]; then pass v6-removal-no-failures
  else fail v6-removal-no-failures "want pod4 in db6's rules before ($had6), gone after (${gone_ms:-not gone}), 300 ok, 0 failed: $d"; fi

  r=$(client http "http://[fd00:96::100]:8080/" --count 300 --timeout 2 --max-time 60)
  d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-removed-pod-never-reached; else fail v6-removed-pod-never-reached "want 0 failed, none to pod4, pod1..pod3 > 0: ${d:-no result}"; fi

  out=$(client connect "[fd00:96::101]:80" --timeout 3)
  if [ "$out" = refused ]; then pass v6-no-endpoints-refused; else fail v6-no-endpoints-refused "connect [fd00:96::101]:80 gave '$out' (want refused)"; fi
  r=$(client udp "[fd00:96::101]:53" --count 3 --timeout 1 --max-time 10)
  d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-udp-no-endpoints-refused; else fail v6-udp-no-endpoints-refused "want 3 x ConnectionRefusedError: ${d:-no result}"; fi
  r=$(client udp "[fd00:96::100]:9053" --count 100 --timeout 1 --max-time 30)
  d=$(judge "$r" 'r["ok"] >= 95 and set(pods) <= {"pod1", "pod2", "pod3"} and len(pods) >= 2')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-udp-roundtrip; else fail v6-udp-roundtrip "want >= 95 of 100 replies from >= 2 of pod1..pod3: ${d:-no result}"; fi
fi

# ---- restart with a service deleted while vipd is down: no stale objects, no failed request
client http http://10.96.0.100:8080/ --count 400 --interval 0.01 --timeout 2 --max-time 60 >"$TMP/restart.out" 2>&1 &
BGR=$!
BG_PIDS+=("$BGR")
sleep 0.3
stop_vipd
down_objs=$(table_now | objects_of_listing | wc -l)
down6=$(v6 && table_now ip6 | objects_of_listing | wc -l)
rm -f "$TMP/manifests/sticky.yaml" "$TMP/manifests/sticky-slice.yaml" "$TMP/manifests/empty6.yaml"
sleep 0.3
kernel_start_vipd nftables "$METHOD"
gen=$(kernel_wait_synced) || gen=
wait "$BGR" 2>/dev/null
r=$(tail -n 1 "$TMP/restart.out")
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 400 and n("pod4") == 0')
"$VIPD" --mode nftables --dry-run --forward-method "$METHOD" --manifests-dir "$TMP/manifests" >"$TMP/dry2.nft" 2>/dev/null
want=$(objects_of_dry "$TMP/dry2.nft")
now=$(table_now)
got=$(objects_of_listing <<<"$now")
stale=$(grep -c -e 'sticky' -e 'set aff-' <<<"$now")
note "restart: requests $r; objects while down $down_objs, after $(wc -l <<<"$got")"
if [ -n "$gen" ] && [ -z "$d" ] && [ "$want" = "$got" ] && [ "$stale" -eq 0 ] && [ "$down_objs" -ge 20 ]; then
  pass restart-no-stale
else
  fail restart-no-stale "resynced: '${gen:-no}'; requests: ${d:-ok}; sticky objects left: $stale; objects vs dry-run: $(diff <(echo "$want") <(echo "$got") | head -n 6 | tr '\n' ' ')"
fi
# ip6: exactly the dry run's objects (nat: pod4's retired endpoint chains gone),
# empty6 (deleted while down) and pod4 nowhere, db6 still answering.
if v6; then
  want6=$(objects_of_dry "$TMP/dry2.nft" ip6)
  now6=$(table_now ip6)
  got6=$(objects_of_listing <<<"$now6")
  r=$(client http "http://[fd00:96::100]:8080/" --count 30 --timeout 2 --max-time 30)
  d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 30 and n("pod4") == 0')
  note "restart, IPv6: ip6 objects while down $down6, after $(wc -l <<<"$got6") (dry run $(wc -l <<<"$want6"))"
  if [ -n "$gen" ] && [ "$want6" = "$got6" ] && [ "$down6" -ge 15 ] && ! grep -q -e 'fd00:96::101' -e 'fd00:244::3:44' <<<"$now6" && [ -z "$d" ]; then
    pass v6-restart-no-stale
  else
    fail v6-restart-no-stale "ip6 objects vs dry-run: $(diff <(echo "$want6") <(echo "$got6") | head -n 6 | tr '\n' ' '); empty6/pod4 lines: $(grep -c -e 'fd00:96::101' -e 'fd00:244::3:44' <<<"$now6"); db6: ${d:-ok}"
  fi
fi

# ---- vipctl, health ---------------------------------------------------------------
if out=$(vipctl list 2>&1) && grep -q '10\.96\.0\.100:8080' <<<"$out" && ! grep -q '10\.244\.3\.44:8080' <<<"$(grep -A5 '10.96.0.100:8080' <<<"$out")"; then
  pass vipctl-list
else
  fail vipctl-list "$(head -c 400 <<<"$out" | tr '\n' ' ')"
fi
if out=$(vipctl stats --json 2>&1) && [ "$(json_field "$out" stats_available)" = False ] &&
   text=$(vipctl stats 2>&1) && grep -q 'nftables mode' <<<"$text"; then
  pass vipctl-stats
else
  fail vipctl-stats "want a document saying stats are not available: $(head -c 300 <<<"$out${text:+ / $text}" | tr '\n' ' ')"
fi
h=$(inlb "$PYTHON" -c 'import urllib.request
try:
    r = urllib.request.urlopen("http://127.0.0.1:10256/healthz", timeout=3); print(r.status)
except Exception as e:
    print("error", e)' 2>&1)
if [[ $h == 200* ]]; then pass healthz; else fail healthz "GET /healthz in ${P}lb: $h"; fi
if vipd_alive && status_json >/dev/null; then pass vipd-alive; else fail vipd-alive "vipd is not running or not answering at the end"; fi
