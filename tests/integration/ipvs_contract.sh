#!/usr/bin/env bash
# usage: tests/integration/ipvs_contract.sh       (run by contract_test.sh; as root)
#
# The ipvs-mode run of the cross-mode contract test: boots the IPVS guest
# (scripts/kernel-vm.sh, the modules of ipvs_test.sh), builds the namespace lab
# inside it (scripts/lab.sh, prefix "ct-", ${P}lb with kernel addresses c0
# 10.0.0.1/24 and p0 10.244.0.1/16), runs vipd --mode ipvs there on the
# manifests of tests/data/contract/ and then contract_scenario.sh, and prints
# the scenario's outcome (one JSON line) on stdout. Everything else (the guest's
# console, progress) goes to stderr. The lab is dual-stack, as contract_test.sh's
# (LAB_IPV6=1; ${P}lb also c0 fd00:10::1/64 and p0 fd00:244::1/64, IPv6
# forwarding); CONTRACT_FAMILIES="4 6" runs the scenario over IPv4, then over
# IPv6 against the same vipd, and prints one outcome line per family, in that order.
# Exit status: 0 with the outcome printed; 1 when the guest produced none;
# 77 with "SKIPPED: reason" on stderr when the guest cannot run here (not root,
# no qemu, no guest kernel, binaries outside the checkout under /tmp or /run).
# Env: VIPD_BUILD_DIR (default build), VIPD_BIN, VIPCTL_BIN, KERNEL_VM_CACHE,
# CONTRACT_FAMILIES (default "4").
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi
# As tests/integration/ipvs_test.sh (dependencies are added by kernel-vm.sh).
MODULES="crc32c_generic nf_conntrack ip_vs ip_vs_rr ip_vs_wrr ip_vs_sh ip_vs_mh xt_ipvs veth bridge dummy
 nf_tables nft_compat nft_chain_nat nft_ct nft_masq nft_reject_ipv4 xt_MASQUERADE xt_conntrack xt_comment
 xt_tcpudp ipt_REJECT ip6t_REJECT"

# ---- guest ------------------------------------------------------------------------
if [ "${1:-}" = --guest ]; then
  [ -n "${KERNEL_VM:-}" ] || { echo "ipvs_contract: --guest runs in scripts/kernel-vm.sh's guest only" >&2; exit 2; }
  export LAB_PREFIX=ct- PYTHON LAB_IPV6=1
  P=$LAB_PREFIX
  G=/run/vipd-contract
  mkdir -p "$G/manifests"
  pid=
  trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; scripts/lab.sh down >/dev/null 2>&1' EXIT
  scripts/lab.sh up >"$G/lab.log" 2>&1 || { echo "lab up failed: $(tail -n 3 "$G/lab.log")"; exit 3; }
  ip -n "${P}lb" addr add 10.0.0.1/24 dev c0 && ip -n "${P}lb" addr add 10.244.0.1/16 dev p0 || exit 3
  # IPv6 as lab_kernel_lb (tests/integration/lib.sh) gives it on the host.
  ip netns exec "${P}lb" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 \
    net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.c0.disable_ipv6=0 \
    net.ipv6.conf.p0.disable_ipv6=0 net.ipv6.conf.all.forwarding=1 >/dev/null &&
    ip -n "${P}lb" addr add fd00:10::1/64 dev c0 nodad && ip -n "${P}lb" addr add fd00:244::1/64 dev p0 nodad || exit 3
  cp tests/data/contract/*.yaml "$G/manifests/"
  ip netns exec "${P}lb" "${VIPD_BIN:?}" --mode ipvs --manifests-dir "$G/manifests" --admin-socket "$G/admin.sock" \
    --metrics-address off --health-address off </dev/null >"$G/vipd.log" 2>&1 &
  pid=$!
  synced=
  for _ in $(seq 1 300); do   # <= ~60 s
    kill -0 "$pid" 2>/dev/null || break
    st=$("${VIPCTL_BIN:?}" --socket "$G/admin.sock" status --json 2>/dev/null) &&
      [[ $st =~ \"generation\"[[:space:]]*:[[:space:]]*([1-9][0-9]*) ]] && { synced=1; break; }
    sleep 0.2
  done
  if [ -z "$synced" ]; then echo "vipd --mode ipvs did not sync: $(tail -n 5 "$G/vipd.log")"; exit 4; fi
  ip netns exec "${P}lb" ipvsadm -Ln
  for fam in ${CONTRACT_FAMILIES:-4}; do
    P=$P bash tests/integration/contract_scenario.sh "$G/manifests" "$fam" >"$VM_SHARE/outcome.tmp" &&
      mv "$VM_SHARE/outcome.tmp" "$VM_SHARE/outcome$fam"
  done
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: tests/integration/ipvs_contract.sh" >&2; exit 2; }
FAMILIES=${CONTRACT_FAMILIES:-4}
[[ $FAMILIES =~ ^[46]( [46])?$ ]] || { echo "ipvs_contract: CONTRACT_FAMILIES must be '4', '6' or '4 6', got '$FAMILIES'" >&2; exit 2; }

# ---- host -------------------------------------------------------------------------
skip() { echo "ipvs_contract: SKIPPED: $1" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (qemu with the host's / over 9p)"
command -v qemu-system-x86_64 >/dev/null 2>&1 || skip "qemu-system-x86_64 not installed (scripts/bootstrap.sh)"
command -v ipvsadm >/dev/null 2>&1 || skip "ipvsadm not installed (scripts/bootstrap.sh)"
B=${VIPD_BUILD_DIR:-build}
find_bin() { local b; for b in "$B/$1" "$B/cmd/$1"; do [ -x "$b" ] && { echo "$(cd "$(dirname "$b")" && pwd)/$1"; return 0; }; done; return 1; }
VIPD=${VIPD_BIN:-$(find_bin vipd)}
VIPCTL=${VIPCTL_BIN:-$(find_bin vipctl)}
[ -n "$VIPD" ] && [ -n "$VIPCTL" ] || { echo "ipvs_contract: vipd/vipctl not found under $B/" >&2; exit 1; }
for bin in "$VIPD" "$VIPCTL"; do
  case $bin in
    "$ROOT"/*) ;;   # the checkout stays visible in the guest, even under /tmp (kernel-vm.sh)
    /tmp/*|/var/tmp/*|/run/*) skip "$bin is under /tmp or /run, which the guest replaces (build inside the checkout)" ;;
  esac
done
scripts/kernel-vm.sh fetch >&2 || skip "no guest kernel (apt-get download failed and nothing is cached)"
S=$(mktemp -d /tmp/vipd-ipvs-contract.XXXXXX)
trap 'rm -rf "$S"' EXIT
# shellcheck disable=SC2086
# A scenario whose requests all time out takes about 4 minutes: room for that once more with IPv6.
limit=360; [ "$FAMILIES" = 4 ] || limit=600
scripts/kernel-vm.sh run --modules "$(echo $MODULES | tr ' ' ',')" --cpus 2 --mem 1024 --timeout "$limit" --share "$S" \
  --env "VIPD_BIN=$VIPD" --env "VIPCTL_BIN=$VIPCTL" --env "PYTHON=$PYTHON" --env "CONTRACT_FAMILIES=$FAMILIES" \
  -- bash tests/integration/ipvs_contract.sh --guest 2>&1 | sed -u 's/^/    | /' >&2
got=0
for fam in $FAMILIES; do
  if [ -s "$S/outcome$fam" ]; then cat "$S/outcome$fam"; got=$((got + 1)); else echo '{}'; fi
done
[ "$got" -gt 0 ] && exit 0
echo "ipvs_contract: the guest produced no outcome (console above)" >&2
exit 1
