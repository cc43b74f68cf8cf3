#!/usr/bin/env bash
# usage: scripts/vagrant-provision.sh gw CLIENT_MAC PODS_MAC
#        scripts/vagrant-provision.sh client MAC
#        scripts/vagrant-provision.sh pods MAC
#
# Provisioning of the Vagrantfile's VMs (run as root inside the VM; the source
# tree is at $VIPD_SRC, default /vagrant). Each NIC of the dataplane networks is
# found by its MAC address (set in the Vagrantfile). Idempotent: safe to re-run
# (`vagrant provision`).
#
#   gw      builds vipd from $VIPD_SRC (meson, release) and installs it under
#           /usr/local; writes /etc/vipd/vipd.conf (the two NICs' PCI addresses,
#           10.0.0.1/24 and 10.244.0.1/16, fnat, one worker per queue pair, at most
#           two), /etc/vipd/manifests (config/demo/manifests), /etc/default/vipd;
#           installs scripts/vipd-preflight.sh as /usr/local/sbin/vipd-preflight and
#           config/vipd.service, then enables and (re)starts vipd: its preflight
#           binds the NICs to uio_pci_generic with dpdk-devbind.py and reserves
#           hugepages. scripts/bootstrap.sh must have run (the Vagrantfile does it).
#   client  10.0.0.2/24 on the NIC, route 10.96.0.0/12 via 10.0.0.1, offloads off.
#   pods    bridge br0 on the NIC; namespaces pod1..pod4 with veths on br0 and the
#           lab's pod addresses, route 10.0.0.0/24 via 10.244.0.1; podserver.py
#           in each (transient systemd units vipd-podN; background processes
#           where systemd is not running).
set -euo pipefail

SRC=${VIPD_SRC:-/vagrant}
log() { echo "vagrant-provision: $*"; }
die() { echo "vagrant-provision: error: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root"
[ -d "$SRC/scripts" ] || die "no source tree at $SRC (set VIPD_SRC)"

# Interface name with this MAC, or "" (after binding to DPDK there is none).
iface_by_mac() {
  local d
  for d in /sys/class/net/*; do
    [ "$(cat "$d/address" 2>/dev/null)" = "${1,,}" ] && { basename "$d"; return 0; }
  done
  return 1
}
offloads_off() { ethtool -K "$1" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true; }
need_pkgs() {
  local missing=() p
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

provision_gw() {
  local mac_c=$1 mac_p=$2 state=/etc/vipd/vagrant-nics if pci q queues=() pcis=() workers
  mkdir -p /etc/vipd/manifests
  # PCI address and queue pairs of each NIC, recorded on the first run (once
  # bound to DPDK the kernel interface is gone).
  if [ ! -s "$state" ]; then
    for mac in "$mac_c" "$mac_p"; do
      if=$(iface_by_mac "$mac") || die "no interface with MAC $mac (check the Vagrantfile's networks)"
      pci=$(basename "$(readlink -f "/sys/class/net/$if/device/..")")
      [[ $pci =~ ^[0-9a-f]{4}: ]] || pci=$(basename "$(readlink -f "/sys/class/net/$if/device")")
      q=$(ethtool -l "$if" 2>/dev/null | awk '/Pre-set maximums/ {m = 1} m && /Combined:/ {print $2; exit}')
      [[ ${q:-} =~ ^[0-9]+$ ]] && [ "$q" -ge 1 ] || q=$(ls -d "/sys/class/net/$if/queues/rx-"* 2>/dev/null | wc -l)
      [ "$q" -ge 1 ] || q=1
      ip link set dev "$if" down
      echo "$mac $pci $q" >>"$state.tmp"
      log "NIC $mac: $if, PCI $pci, $q queue pair(s)"
    done
    mv "$state.tmp" "$state"
  fi
  while read -r _ pci q; do pcis+=("$pci"); queues+=("$q"); done <"$state"
  # One worker per queue pair (both ports need one queue per worker), at most 2,
  # and at least one CPU left for the main lcore.
  workers=$(( queues[0] < queues[1] ? queues[0] : queues[1] ))
  [ "$workers" -gt 2 ] && workers=2
  [ "$workers" -gt $(( $(nproc) - 1 )) ] && workers=$(( $(nproc) - 1 ))
  [ "$workers" -ge 1 ] || die "the gw VM needs at least 2 CPUs (main lcore + one worker)"
  local wl=1; [ "$workers" -eq 2 ] && wl=1,2

  log "building vipd from $SRC"
  if [ ! -f /var/lib/vipd-build/build.ninja ]; then
    meson setup /var/lib/vipd-build "$SRC" --buildtype=release --prefix=/usr/local >/dev/null
  fi
  ninja -C /var/lib/vipd-build vipd vipctl
  meson install -C /var/lib/vipd-build --quiet --no-rebuild --tags runtime 2>/dev/null ||
    meson install -C /var/lib/vipd-build --quiet --no-rebuild
  install -D -m 0755 "$SRC/scripts/vipd-preflight.sh" /usr/local/sbin/vipd-preflight
  install -D -m 0644 "$SRC/config/vipd.service" /etc/systemd/system/vipd.service
  cp "$SRC"/config/demo/manifests/*.yaml /etc/vipd/manifests/
  echo uio_pci_generic >/etc/modules-load.d/vipd.conf
  cat >/etc/default/vipd <<EOF
# Read by vipd.service (docs/operations.md).
VIPD_HUGEPAGES=512
VIPD_NIC_DRIVER=uio_pci_generic
VIPD_ARGS=
EOF
  cat >/etc/vipd/vipd.conf.new <<EOF
# Written by scripts/vagrant-provision.sh (docs/configuration.md, docs/operations.md).
mode = dpdk
eal-args = --file-prefix vipd
port = ${pcis[0]} 10.0.0.1/24
port = ${pcis[1]} 10.244.0.1/16
main-lcore = 0
worker-lcores = $wl
forward-method = fnat
fnat-local-addrs = 10.244.255.1,10.244.255.2
manifests-dir = /etc/vipd/manifests
admin-socket = /run/vipd/admin.sock
metrics-address = 127.0.0.1:10249
log-level = info
EOF
  mv /etc/vipd/vipd.conf.new /etc/vipd/vipd.conf
  log "vipd.conf: ports ${pcis[*]}, $workers worker(s) (queue pairs: ${queues[*]})"
  systemctl daemon-reload
  systemctl enable vipd >/dev/null 2>&1
  systemctl restart vipd
  for _ in $(seq 1 60); do
    vipctl --socket /run/vipd/admin.sock status >/dev/null 2>&1 && break
    sleep 1
  done
  systemctl --no-pager --lines 15 status vipd || die "vipd is not running (journalctl -u vipd)"
  vipctl --socket /run/vipd/admin.sock list || true
}

provision_client() {
  local if
  if=$(iface_by_mac "$1") || die "no interface with MAC $1"
  need_pkgs python3 ethtool iproute2
  offloads_off "$if"
  ip addr replace 10.0.0.2/24 dev "$if"
  ip link set dev "$if" up
  ip route replace 10.96.0.0/12 via 10.0.0.1 dev "$if"
  log "client: $if 10.0.0.2/24, 10.96.0.0/12 via 10.0.0.1"
}

provision_pods() {
  local if n ips=([1]=10.244.1.15 [2]=10.244.2.88 [3]=10.244.3.12 [4]=10.244.3.44)
  if=$(iface_by_mac "$1") || die "no interface with MAC $1"
  need_pkgs python3 ethtool iproute2
  ip link show br0 >/dev/null 2>&1 || ip link add br0 type bridge stp_state 0 forward_delay 0
  sysctl -qw net.bridge.bridge-nf-call-iptables=0 2>/dev/null || true
  offloads_off "$if"
  ip link set dev "$if" master br0
  ip link set dev "$if" up
  ip link set dev br0 up
  for n in 1 2 3 4; do
    ip netns add "pod$n" 2>/dev/null || true
    if ! ip link show "pod$n" >/dev/null 2>&1; then
      ip link add "pod$n" type veth peer name eth0 netns "pod$n"
    fi
    ip link set dev "pod$n" master br0
    ip link set dev "pod$n" up
    offloads_off "pod$n"
    ip netns exec "pod$n" ethtool -K eth0 tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
    ip -n "pod$n" addr replace "${ips[$n]}/16" dev eth0
    ip -n "pod$n" link set dev eth0 up
    ip -n "pod$n" link set dev lo up
    ip -n "pod$n" route replace 10.0.0.0/24 via 10.244.0.1 dev eth0
    if [ -d /run/systemd/system ]; then
      systemctl stop "vipd-pod$n" >/dev/null 2>&1 || true
      systemctl reset-failed "vipd-pod$n" >/dev/null 2>&1 || true
      systemd-run --quiet --unit "vipd-pod$n" ip netns exec "pod$n" python3 "$SRC/scripts/lab/podserver.py" \
        --name "pod$n" --http-port 8080 --udp-port 9053
    else  # no systemd (a container or test guest): a background process
      for pid in $(ip netns pids "pod$n"); do kill "$pid" 2>/dev/null || true; done
      ip netns exec "pod$n" python3 "$SRC/scripts/lab/podserver.py" --name "pod$n" \
        --http-port 8080 --udp-port 9053 </dev/null >"/run/vipd-pod$n.log" 2>&1 &
    fi
    log "pod$n: ${ips[$n]} (tcp 8080, udp 9053)"
  done
}

case ${1:-} in
  gw) [ $# -eq 3 ] || die "usage: vagrant-provision.sh gw CLIENT_MAC PODS_MAC"; provision_gw "$2" "$3" ;;
  client) [ $# -eq 2 ] || die "usage: vagrant-provision.sh client MAC"; provision_client "$2" ;;
  pods) [ $# -eq 2 ] || die "usage: vagrant-provision.sh pods MAC"; provision_pods "$2" ;;
  *) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
