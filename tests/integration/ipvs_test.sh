#!/usr/bin/env bash
# usage: tests/integration/ipvs_test.sh            (as root, from anywhere in the repository)
# timeout: 600
#
# vipd in `mode = ipvs` against a real kernel IPVS. The host kernel has no IPVS,
# so the test boots Debian's kernel under qemu (scripts/kernel-vm.sh, TCG) with
# ip_vs, its schedulers, nf_conntrack, xt_ipvs, the nftables/xtables modules of
# iptables' MASQUERADE/REJECT, veth, bridge and dummy loaded, and runs itself
# inside the guest (--guest), where the whole namespace lab lives:
#
#   ${P}client 10.0.0.2 --veth-- ${P}lb c0 10.0.0.1, p0 10.244.0.1 --veth-- ${P}sw br0 -- pod1..pod4
#
# with IPv6 beside it (scripts/lab.sh LAB_IPV6=1: client fd00:10::2, lb c0
# fd00:10::1 and p0 fd00:244::1, pods fd00:244::1:15 ... fd00:244::3:44).
#
# vipd runs in ${P}lb (IPVS, its sysctls, the dummy interface vipd-ipvs0 and
# the iptables chains are all per network namespace, so nothing of it reaches
# the guest's root namespace, let alone the host). Checks, each printed as
# "PASS: name" / "FAIL: name: detail" (the guest's lines are collected in the
# shared directory and printed by the host at the end):
#   host: the dry-run prints the IPVS listing of the demo manifests, and with
#   IPv6 Services the IPv6 services, /128 addresses and the ip6tables payload;
#   guest: vipd starts and reports mode ipvs; the sysctls are set in ${P}lb;
#   `ipvsadm -Ln` equals what `vipd --dry-run --mode ipvs` wants (services,
#   schedulers, persistence, real servers, weights; none twice) after each
#   sync; VIPs bound /32 on vipd-ipvs0; iptables chains + jumps exactly once;
#   400 requests over 4 pods with 0 failed; pods see the lb address (fnat
#   masquerade); pod4 leaves the EndpointSlice while 8 connections are open ->
#   weight 0 with ActiveConn > 0, its open connections still answered, no new
#   flow to it, deleted by vipd once its connections are gone (IPVS keeps
#   closed TCP connections in TIME_WAIT for 120 s, so this is checked last);
#   the service without endpoints -> connection refused (TCP and UDP, REJECT
#   counter); UDP; sessionAffinity ClientIP -> one pod; a vipd restart while
#   requests run: 0 failed, same state; a restart after the kernel's state was
#   tampered with (stale service, wrong scheduler and weight, missing real
#   server, another tool's service) reconciles it; a removed service's VIP is
#   unbound; a service with scheduler lc (module not loaded) -> a one-line
#   ENOENT error, vipd alive, a clean full sync once the service is gone;
#   vipctl list/status; IPv6 (db6 fd00:96::100 in front of the pods' IPv6
#   addresses, empty6 fd00:96::101 without endpoints, in the table from the
#   start, so the restart and ipvsadm checks above cover them too; the
#   tampering adds a stale IPv6 service with its /128, a wrong IPv6 weight and a
#   missing IPv6 real server): /128 VIPs,
#   IPv6 forwarding, ip6tables chains and jumps once; 100 requests over 4 pods;
#   pod4 leaves db6's slice while requests run (0 failed, the change-to-kernel
#   time printed), no new flow to it; refused (TCP, UDP) with the ip6tables
#   REJECT counter rising (these run while pod4's IPv4 real server drains);
#   clean exit.
# Exit status 0 if all passed, 1 if any failed, 77 (with SKIP lines) when it
# cannot run here: not root, no qemu, no ipvsadm/iptables, or no guest kernel
# (apt-get download failed and nothing cached in .cache/vm). About 5-7 minutes
# under TCG on two loaded cores (the time is printed): building the lab's pods
# in the guest takes 1-1.5 min, pod4's drain at least 2 (IPVS TIME_WAIT).
# Env: VIPD_BUILD_DIR (default build; must be inside the checkout, not under
# /tmp or /run: the guest has its own), VIPD_BIN, VIPCTL_BIN, IPVS_TEST_VM_TIMEOUT
# (default 540 s), KERNEL_VM_CACHE.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi
NAME=ipvs_test
MODULES="crc32c_generic nf_conntrack ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh ip_vs_mh xt_ipvs veth bridge dummy
 nf_tables nft_compat nft_chain_nat nft_ct nft_masq nft_reject_ipv4 xt_MASQUERADE xt_conntrack xt_comment
 xt_tcpudp ipt_REJECT ip6t_REJECT"
GUEST_CHECKS=(vipd-starts sysctls-set ipvsadm-initial vips-bound rules-once http-four-pods masquerade
  drain-weight-zero drain-open-conns-served drain-no-new-flows ipvsadm-after-removal no-endpoints-refused
  udp-no-endpoints-refused udp-roundtrip affinity restart-no-failures restart-same-state
  v6-reconcile-tampered reconcile-tampered service-removed-unbound kernel-error-resync vipctl v6-programmed
  v6-http-four-pods v6-removal-no-failures
  v6-removed-no-new-flows v6-no-endpoints-refused graceful-drain-deleted vipd-clean-exit)

if [ "${1:-}" = --guest ]; then
  [ -n "${KERNEL_VM:-}" ] || { echo "ipvs_test: --guest runs inside scripts/kernel-vm.sh's guest only" >&2; exit 2; }
  # shellcheck source=tests/integration/ipvs_guest.sh
  . tests/integration/ipvs_guest.sh
  guest_main
  exit $?
fi
[ $# -eq 0 ] || { echo "usage: tests/integration/ipvs_test.sh" >&2; exit 2; }

# =================================================================================
# Host side
# =================================================================================
T_START=$(date +%s)
skip_all() {
  local c
  for c in dry-run dry-run-ipv6 vm-boots "${GUEST_CHECKS[@]}" time-budget; do echo "SKIP: $c: $1"; done
  echo "!!! $NAME: all checks SKIPPED: $1" >&2
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip_all "not root (qemu with the host's / over 9p, namespaces in the guest)"
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
  skip_all "qemu-system-x86_64 not installed (Debian package qemu-system-x86; scripts/bootstrap.sh installs it)"
for t in ipvsadm iptables iptables-restore ip ss; do
  command -v "$t" >/dev/null 2>&1 || skip_all "'$t' not installed (scripts/bootstrap.sh)"
done
NPASS=0
NFAIL=0
pass() { echo "PASS: $1"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL: $1: $2"; NFAIL=$((NFAIL + 1)); }
note() { echo "    $*"; }

. scripts/kernel-vm-host.sh
vm_fetch_kernel
vm_guest_bins

TMP=$(mktemp -d /tmp/vipd-ipvstest.XXXXXX)
S=$TMP/share
mkdir -p "$S"
VM_PID=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$VM_PID" ] && kill -0 "$VM_PID" 2>/dev/null; then
    kill -TERM "$VM_PID" 2>/dev/null   # kernel-vm.sh stops qemu on the way out
    for _ in $(seq 1 100); do kill -0 "$VM_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$VM_PID" 2>/dev/null
  fi
  rm -rf "$TMP"
  note "$NAME: $NPASS passed, $NFAIL failed, $(( $(date +%s) - T_START )) s in all"
  if [ "$NFAIL" -gt 0 ]; then exit 1; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'fail interrupted "signal received"; exit 1' INT TERM

# ---- dry run (no kernel needed) -----------------------------------------------------
if out=$("$VIPD" --mode ipvs --dry-run --manifests-dir config/demo/manifests 2>&1) &&
   grep -q '^TCP  10\.96\.0\.100:8080 rr$' <<<"$out" &&
   [ "$(grep -c '^  -> 10\.244\.[0-9.]*:8080 *Masq *1$' <<<"$out")" -eq 4 ] &&
   grep -q '^#   10\.96\.0\.101/32$' <<<"$out" &&
   grep -q -- '-d 10\.96\.0\.101/32 -p tcp -m tcp --dport 80 -j REJECT' <<<"$out"; then
  pass dry-run
else
  fail dry-run "vipd --mode ipvs --dry-run: $(head -c 400 <<<"$out" | tr '\n' '|')"
fi

# IPv6 Services beside the demo ones: the IPv6 part of the dry run.
mkdir -p "$TMP/m6"
cp config/demo/manifests/*.yaml "$TMP/m6/"
printf '%s\n' "apiVersion: v1" "kind: Service" "metadata: {name: db6, namespace: default}" \
  "spec: {clusterIP: 'fd00:96::100', clusterIPs: ['fd00:96::100'], ipFamilies: [IPv6], ipFamilyPolicy: SingleStack," \
  "  ports: [{name: http, port: 8080, protocol: TCP}]}" "---" "apiVersion: v1" "kind: Service" \
  "metadata: {name: empty6, namespace: default}" \
  "spec: {clusterIP: 'fd00:96::101', clusterIPs: ['fd00:96::101'], ipFamilies: [IPv6], ipFamilyPolicy: SingleStack," \
  "  ports: [{name: http, port: 80, protocol: TCP}]}" "---" "apiVersion: discovery.k8s.io/v1" "kind: EndpointSlice" \
  "metadata: {name: db6-1, namespace: default, labels: {kubernetes.io/service-name: db6}}" "addressType: IPv6" \
  "ports: [{name: http, port: 8080, protocol: TCP}]" "endpoints:" \
  "  - {addresses: ['fd00:244::1:15'], conditions: {ready: true}}" \
  "  - {addresses: ['fd00:244::2:88'], conditions: {ready: true}}" >"$TMP/m6/v6.yaml"
if out=$("$VIPD" --mode ipvs --dry-run --manifests-dir "$TMP/m6" 2>&1) &&
   grep -q '^TCP  \[fd00:96::100\]:8080 rr$' <<<"$out" &&
   [ "$(grep -c '^  -> \[fd00:244::[0-9:]*\]:8080 *Masq *1$' <<<"$out")" -eq 2 ] &&
   grep -q '^#   fd00:96::101/128$' <<<"$out" && grep -q '^#   net.ipv6.conf.all.forwarding = 1$' <<<"$out" &&
   grep -q '^# ip6tables-restore --noflush payload$' <<<"$out" &&
   grep -q -- '-d fd00:96::101/128 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp6-port-unreachable' <<<"$out" &&
   grep -q '^TCP  10\.96\.0\.100:8080 rr$' <<<"$out" && ! grep -q 'not programmed' <<<"$out"; then
  pass dry-run-ipv6
else
  fail dry-run-ipv6 "vipd --mode ipvs --dry-run with IPv6 Services: $(grep -e fd00 -e ipv6 -e 'not programmed' <<<"$out" | head -c 600 | tr '\n' '|')"
fi

# ---- the guest ------------------------------------------------------------------------
T_BOOT=$(date +%s)
VM_TIMEOUT=${IPVS_TEST_VM_TIMEOUT:-540}
# shellcheck disable=SC2086
scripts/kernel-vm.sh run --modules "$(echo $MODULES | tr ' ' ',')" --cpus 2 --mem 1024 --timeout "$VM_TIMEOUT" \
  --share "$S" --env "VIPD_BIN=$VIPD" --env "VIPCTL_BIN=$VIPCTL" --env "PYTHON=$PYTHON" --env "VM_TIMEOUT=$VM_TIMEOUT" \
  -- bash tests/integration/ipvs_test.sh --guest \
  > >(tee "$TMP/vm.log" | sed -u 's/^/    | /') 2>&1 &
VM_PID=$!
wait "$VM_PID"
vrc=$?
VM_PID=
sleep 0.2   # the tee above
if grep -q 'guest: up ' "$TMP/vm.log"; then pass vm-boots; else fail vm-boots "the guest did not reach its command (console above)"; fi
note "guest: exit status $vrc after $(( $(date +%s) - T_BOOT )) s"
if [ -s "$S/results" ]; then
  # The guest's PASS/FAIL/SKIP lines, counted here.
  while IFS= read -r line; do
    case $line in
      "PASS: "*) pass "${line#PASS: }" ;;
      "FAIL: "*) r=${line#FAIL: }; fail "${r%%: *}" "${r#*: }" ;;
      "SKIP: "*) echo "$line" ;;
    esac
  done <"$S/results"
fi
for c in "${GUEST_CHECKS[@]}"; do
  grep -q "^\(PASS\|FAIL\|SKIP\): $c\b" "$S/results" 2>/dev/null ||
    fail "$c" "not reached in the guest (guest exit status $vrc; 124 = VM timeout, 125 = boot failure)"
done
total=$(( $(date +%s) - T_START ))
note "ipvs_test took $total s"
if [ "$total" -lt 590 ]; then pass time-budget; else fail time-budget "took $total s, the budget is 590 s"; fi
