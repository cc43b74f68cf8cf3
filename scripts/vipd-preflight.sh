#!/usr/bin/env bash
# usage: scripts/vipd-preflight.sh [--config FILE] [--hugepages N] [--driver DRIVER] [--check]
#
# Makes a gateway node ready for vipd in dpdk mode; run before vipd starts (the
# systemd unit config/vipd.service runs it as ExecStartPre, the Vagrant gw VM and
# scripts/vm-test.sh's guest run it too). Reads vipd's configuration file
# (default /etc/vipd/vipd.conf); for mode iptables/ipvs it checks nothing.
#
#  1. Hugepages (unless eal-args has --no-huge): at least N 2 MiB pages reserved
#     (default $VIPD_HUGEPAGES, else 512 = 1 GiB; raised through vm.nr_hugepages if
#     fewer) and a hugetlbfs mounted (/dev/hugepages is mounted if none is).
#  2. NICs: every `port` whose device is a PCI address is bound to DRIVER (default
#     $VIPD_NIC_DRIVER, else uio_pci_generic; vfio-pci needs an IOMMU, or no-IOMMU
#     mode, which Debian's kernel lacks): the module is loaded if missing, then
#     dpdk-devbind.py -b DRIVER (it refuses to take a NIC that carries an active
#     route, e.g. the management NIC). Without dpdk-devbind.py (Debian package dpdk)
#     the sysfs driver_override interface is used directly.
#
# --check: change nothing, only report; exit 1 if something is not ready.
# Exit status: 0 ready, 1 not ready (each problem on one "vipd-preflight: ..." line
# saying what to do), 2 usage or unreadable configuration.
set -uo pipefail

CONF=/etc/vipd/vipd.conf
HUGE=${VIPD_HUGEPAGES:-512}
DRIVER=${VIPD_NIC_DRIVER:-uio_pci_generic}
CHECK=0
usage() { echo "usage: scripts/vipd-preflight.sh [--config FILE] [--hugepages N] [--driver uio_pci_generic|vfio-pci|igb_uio] [--check]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --config) [ $# -ge 2 ] || usage; CONF=$2; shift 2 ;;
    --hugepages) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; HUGE=$2; shift 2 ;;
    --driver) [ $# -ge 2 ] || usage; DRIVER=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage ;;
  esac
done
[[ $HUGE =~ ^[0-9]+$ ]] || { echo "vipd-preflight: VIPD_HUGEPAGES '$HUGE' is not a number" >&2; exit 2; }

say() { echo "vipd-preflight: $*"; }
PROBLEMS=0
problem() { echo "vipd-preflight: NOT READY: $*" >&2; PROBLEMS=$((PROBLEMS + 1)); }

[ -r "$CONF" ] || { echo "vipd-preflight: cannot read the configuration file '$CONF'" >&2; exit 2; }
# INI `name = value`, '#' comments (as vipd parses it).
conf_values() {
  sed -e 's/#.*//' "$CONF" | sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*\(.*[^[:space:]]\)[[:space:]]*\$/\1/p"
}
mode=$(conf_values mode | tail -n 1)
if [ -n "$mode" ] && [ "$mode" != dpdk ]; then
  say "mode $mode: nothing to prepare"
  exit 0
fi
eal=$(conf_values eal-args | tail -n 1)

# ---- hugepages -------------------------------------------------------------------
if [[ " $eal " == *" --no-huge "* ]]; then
  say "eal-args has --no-huge: no hugepages needed"
else
  have=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)
  if [ "$have" -lt "$HUGE" ]; then
    if [ "$CHECK" -eq 1 ]; then
      problem "$have hugepages reserved, want $HUGE (sysctl -w vm.nr_hugepages=$HUGE, or VIPD_HUGEPAGES)"
    else
      echo "$HUGE" >/proc/sys/vm/nr_hugepages 2>/dev/null
      have=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)
      if [ "$have" -lt "$HUGE" ]; then
        problem "only $have of $HUGE hugepages could be reserved (memory fragmented or too small: reserve them at boot with hugepages=$HUGE on the kernel command line, or lower VIPD_HUGEPAGES)"
      else
        say "reserved $have hugepages of $(awk '/Hugepagesize/ {print $2 $3}' /proc/meminfo)"
      fi
    fi
  else
    say "$have hugepages reserved (want >= $HUGE)"
  fi
  if ! awk '$3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts; then
    if [ "$CHECK" -eq 1 ]; then
      problem "no hugetlbfs mounted (mount -t hugetlbfs nodev /dev/hugepages)"
    else
      mkdir -p /dev/hugepages
      if mount -t hugetlbfs nodev /dev/hugepages; then say "mounted hugetlbfs on /dev/hugepages"
      else problem "cannot mount hugetlbfs on /dev/hugepages"; fi
    fi
  fi
fi

# ---- NICs --------------------------------------------------------------------------
pcis=()
while read -r dev _; do
  [ -n "$dev" ] || continue
  if [[ $dev =~ ^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$ ]]; then
    [[ $dev =~ ^[0-9a-fA-F]{4}: ]] || dev=0000:$dev
    pcis+=("${dev,,}")
  fi
done < <(conf_values port)

bound_driver() { basename "$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null)" 2>/dev/null; }
sysfs_bind() {  # pci: without dpdk-devbind.py
  local pci=$1 cur
  cur=$(bound_driver "$pci")
  [ -n "$cur" ] && echo "$pci" >"/sys/bus/pci/devices/$pci/driver/unbind"
  echo "$DRIVER" >"/sys/bus/pci/devices/$pci/driver_override" &&
    echo "$pci" >/sys/bus/pci/drivers_probe 2>/dev/null
  [ "$(bound_driver "$pci")" = "$DRIVER" ]
}

if [ "${#pcis[@]}" -eq 0 ]; then
  say "no PCI ports in $CONF (vdevs only): no NIC to bind"
else
  mod=${DRIVER//-/_}
  if [ ! -d "/sys/module/$mod" ] && [ ! -d "/sys/bus/pci/drivers/$DRIVER" ]; then
    if [ "$CHECK" -eq 1 ]; then problem "kernel module $DRIVER not loaded (modprobe $DRIVER)"
    elif ! modprobe "$DRIVER" 2>/dev/null; then problem "cannot load kernel module $DRIVER (modprobe $DRIVER; on Debian it is in linux-image-*)"; fi
  fi
  for pci in "${pcis[@]}"; do
    if [ ! -e "/sys/bus/pci/devices/$pci" ]; then
      problem "port $pci: no such PCI device (lspci -D lists the NICs; fix 'port' in $CONF)"
      continue
    fi
    cur=$(bound_driver "$pci")
    if [ "$cur" = "$DRIVER" ]; then
      say "$pci already bound to $DRIVER"
    elif [ "$CHECK" -eq 1 ]; then
      problem "$pci is bound to '${cur:-no driver}', not $DRIVER (dpdk-devbind.py -b $DRIVER $pci)"
    elif command -v dpdk-devbind.py >/dev/null; then
      # (lspci, which dpdk-devbind.py runs, may warn about missing module files)
      if dpdk-devbind.py -b "$DRIVER" "$pci" 2> >(grep -v libkmod >&2) && [ "$(bound_driver "$pci")" = "$DRIVER" ]; then
        say "$pci: ${cur:-no driver} -> $DRIVER"
      else
        problem "dpdk-devbind.py could not bind $pci to $DRIVER (in use by an interface with a route? see its message)"
      fi
    elif sysfs_bind "$pci"; then
      say "$pci: ${cur:-no driver} -> $DRIVER (sysfs)"
    else
      problem "could not bind $pci to $DRIVER through sysfs"
    fi
  done
fi

if [ "$PROBLEMS" -gt 0 ]; then
  echo "vipd-preflight: $PROBLEMS problem(s); vipd would not start (docs/operations.md, Troubleshooting)" >&2
  exit 1
fi
say "ready"
exit 0
