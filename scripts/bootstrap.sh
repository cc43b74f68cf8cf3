#!/usr/bin/env bash
# usage: scripts/bootstrap.sh [--check]
#   --check: only report (exit 1 if a package is missing), install nothing
# Installs every Debian package that vipd's build, tests and demo need.
# Idempotent: packages already present are left alone; apt-get runs only if
# something is missing. Must run as root on Debian 12.
set -euo pipefail

PKGS=(
  build-essential pkg-config meson ninja-build
  libdpdk-dev dpdk
  libboost-program-options-dev
  prometheus-cpp-dev libcpp-httplib-dev nlohmann-json3-dev
  libyaml-cpp-dev libsimdjson-dev libcurl4-openssl-dev libssl-dev
  libgtest-dev libgmock-dev
  clang libclang-rt-14-dev llvm  # libFuzzer + sanitizers (scripts/fuzz.sh); llvm: llvm-symbolizer
  libnl-3-dev libnl-genl-3-dev libnl-route-3-dev
  libnftables-dev libnftnl-dev nftables  # nftables mode (libnftables; libnftnl batches for partial syncs; nft for the tests and inspecting)
  iproute2 ethtool iptables ipvsadm procps kmod
  python3 curl openssl python3-kubernetes
  python3-scapy  # tests/integration/hostile_test.sh (scripts/lab/hostile.py)
  libpcap0.8  # scapy compiles its sniffers' kernel (BPF) filters with it
  prometheus
  qemu-system-x86 cpio busybox-static
  valgrind gnuplot-nox  # tests/integration/bench_test.sh: instruction counts (callgrind) and plots
  nginx-light haproxy  # tests/integration/proxyproto_test.sh: PROXY protocol backends, inside lab namespaces only
  bird2  # docs/gateway.md: the routing daemon that exports --announce-table over BGP, inside lab namespaces only
  frr  # docs/gateway.md: the ECMP router of gateway_test.sh ecmp (zebra, bgpd, bfdd), inside lab namespaces only
)
# Installed for the lab, which starts them inside its namespaces: never as
# host services (not started by the install, disabled afterwards).
HOST_SERVICES=(nginx haproxy bird frr)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "bootstrap: all ${#PKGS[@]} packages present"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "bootstrap: missing ${missing[*]}"
  exit 1
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "bootstrap: missing packages (${missing[*]}) and not root; run as root" >&2
  exit 1
fi

echo "bootstrap: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# policy-rc.d answering 101 keeps the packages' services from starting during the
# install; ours is removed afterwards (an existing one, e.g. Docker's, stays).
POLICY=/usr/sbin/policy-rc.d
OWN_POLICY=0
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\n# scripts/bootstrap.sh: no service starts during the install\nexit 101\n' >"$POLICY"
  chmod 755 "$POLICY"
  OWN_POLICY=1
  trap 'rm -f "$POLICY"' EXIT
fi
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
for s in "${HOST_SERVICES[@]}"; do
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable "$s.service" >/dev/null 2>&1 || true  # works without a running systemd too
    [ -d /run/systemd/system ] && { systemctl stop "$s.service" >/dev/null 2>&1 || true; }
  elif command -v update-rc.d >/dev/null 2>&1 && [ -e "/etc/init.d/$s" ]; then
    update-rc.d "$s" disable >/dev/null 2>&1 || true
  fi
done
[ "$OWN_POLICY" = 1 ] && rm -f "$POLICY" && trap - EXIT
echo "bootstrap: done"
