#!/usr/bin/env bash
# usage: tests/integration/vagrant_test.sh
#
# The deployment files, checked without starting a VM:
#  - `vagrant validate` of the Vagrantfile with the libvirt provider (the default;
#    Debian's vagrant-libvirt plugin validates its provider options) and, ignoring
#    provider options, with virtualbox; a copy with a bogus libvirt option must be
#    rejected (the validation is not vacuous);
#  - the provisioning and preflight scripts parse (bash -n);
#  - config/vipd.service passes `systemd-analyze verify` (with its two
#    executables pointed at stand-ins, as they are not installed here);
#  - scripts/vipd-preflight.sh --check: ready for a vdev/--no-huge configuration,
#    not ready (exit 1, a clear message) for a PCI port that does not exist.
# Vagrant and vagrant-libvirt are installed from Debian (apt-get) when missing and
# possible; otherwise the vagrant checks are SKIPPED loudly. Exit status: 0 all
# passed, 1 any failed, 77 when nothing could run.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
NAME=vagrant_test
NPASS=0
NFAIL=0
NSKIP=0
pass() { echo "PASS: $1"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL: $1: $2"; NFAIL=$((NFAIL + 1)); }
skip() { echo "SKIP: $1: $2"; NSKIP=$((NSKIP + 1)); echo "!!! $NAME: $1 SKIPPED: $2" >&2; }
note() { echo "    $*"; }

TMP=$(mktemp -d /tmp/vipd-vagrant-test.XXXXXX)
trap 'rm -rf "$TMP"; note "$NAME: $NPASS passed, $NFAIL failed, $NSKIP skipped"' EXIT
# Vagrant's state and plugin/box directories go to the temp dir, not ~ or ./.vagrant.
export VAGRANT_HOME=$TMP/vagrant.d VAGRANT_DOTFILE_PATH=$TMP/dot VAGRANT_CHECKPOINT_DISABLE=1

# ---- vagrant --------------------------------------------------------------------
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
why=
if ! command -v vagrant >/dev/null 2>&1 || ! have_pkg vagrant-libvirt; then
  if [ "$(id -u)" -ne 0 ]; then
    why="vagrant/vagrant-libvirt not installed and not root (apt-get install vagrant vagrant-libvirt)"
  else
    note "installing vagrant and vagrant-libvirt from Debian (apt-get)"
    if ! DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends \
         vagrant vagrant-libvirt >"$TMP/apt.log" 2>&1; then
      tail -n 5 "$TMP/apt.log" | sed 's/^/    /'
      why="apt-get install vagrant vagrant-libvirt failed (no package mirror reachable?)"
    fi
  fi
fi
VCHECKS=(vagrant-validate-libvirt vagrant-validate-virtualbox vagrant-validate-rejects-bogus)
if [ -n "$why" ]; then
  for c in "${VCHECKS[@]}"; do skip "$c" "$why"; done
else
  note "$(vagrant --version 2>/dev/null), plugins: $(vagrant plugin list 2>/dev/null | tr '\n' ' ')"
  if out=$(VAGRANT_DEFAULT_PROVIDER=libvirt vagrant validate 2>&1); then
    pass vagrant-validate-libvirt
  else
    fail vagrant-validate-libvirt "$(tr '\n' ' ' <<<"$out" | cut -c1-400)"
  fi
  if out=$(VAGRANT_DEFAULT_PROVIDER=virtualbox vagrant validate --ignore-provider 2>&1); then
    pass vagrant-validate-virtualbox
  else
    fail vagrant-validate-virtualbox "$(tr '\n' ' ' <<<"$out" | cut -c1-400)"
  fi
  # Negative control: the same tree with an unknown libvirt option must fail.
  mkdir -p "$TMP/tree"
  cp -r Vagrantfile scripts config "$TMP/tree/"
  sed -i 's/^\( *\)lv\.cpu_mode = \(.*\)$/\1lv.cpu_mode = \2\n\1lv.no_such_option = 1/' "$TMP/tree/Vagrantfile"
  if ! grep -q no_such_option "$TMP/tree/Vagrantfile"; then
    fail vagrant-validate-rejects-bogus "could not plant the bogus option (lv.cpu_mode line gone?)"
  elif out=$(cd "$TMP/tree" && VAGRANT_DEFAULT_PROVIDER=libvirt vagrant validate 2>&1); then
    fail vagrant-validate-rejects-bogus "a Vagrantfile with lv.no_such_option validated: $(tr '\n' ' ' <<<"$out" | cut -c1-200)"
  elif grep -q no_such_option <<<"$out"; then
    pass vagrant-validate-rejects-bogus
  else
    fail vagrant-validate-rejects-bogus "failed for another reason: $(tr '\n' ' ' <<<"$out" | cut -c1-300)"
  fi
fi

# ---- scripts parse -----------------------------------------------------------------
bad=
for s in scripts/vagrant-provision.sh scripts/vipd-preflight.sh scripts/kernel-vm.sh scripts/vm-test.sh; do
  bash -n "$s" 2>"$TMP/syntax" || bad+="$s: $(head -n 2 "$TMP/syntax" | tr '\n' ' ') "
done
if [ -z "$bad" ]; then pass scripts-parse; else fail scripts-parse "$bad"; fi

# ---- systemd unit ------------------------------------------------------------------
if ! command -v systemd-analyze >/dev/null 2>&1; then
  skip systemd-unit-verify "systemd-analyze not installed (Debian package systemd)"
else
  mkdir -p "$TMP/unit"
  printf '#!/bin/sh\nexit 0\n' >"$TMP/unit/stand-in"
  chmod +x "$TMP/unit/stand-in"
  sed -e "s|/usr/local/sbin/vipd-preflight|$TMP/unit/stand-in|; s|/usr/local/bin/vipd|$TMP/unit/stand-in|" \
    config/vipd.service >"$TMP/unit/vipd.service"
  out=$(systemd-analyze verify "$TMP/unit/vipd.service" 2>&1)
  rc=$?
  # Complaints about other units of this machine are not ours.
  mine=$(grep 'vipd.service' <<<"$out")
  if [ "$rc" -eq 0 ] && [ -z "$mine" ]; then
    pass systemd-unit-verify
  else
    fail systemd-unit-verify "exit $rc: $(tr '\n' ' ' <<<"${mine:-$out}" | cut -c1-400)"
  fi
  d=
  grep -q '^Restart=on-failure' config/vipd.service || d+="no Restart=on-failure; "
  grep -q '^ExecStartPre=.*vipd-preflight' config/vipd.service || d+="no preflight ExecStartPre; "
  grep -q '^StandardError=journal' config/vipd.service || d+="stderr not to the journal; "
  if [ -z "$d" ]; then pass systemd-unit-contents; else fail systemd-unit-contents "$d"; fi
fi

# ---- preflight --check -----------------------------------------------------------------
cat >"$TMP/vdev.conf" <<'EOF'
mode = dpdk
eal-args = --no-huge -m 512   # comment
port = net_af_packet0,iface=c0 10.0.0.1/24
EOF
if out=$(bash scripts/vipd-preflight.sh --check --config "$TMP/vdev.conf" 2>&1) && grep -q 'ready' <<<"$out"; then
  pass preflight-vdev-ready
else
  fail preflight-vdev-ready "$(tr '\n' ' ' <<<"$out")"
fi
cat >"$TMP/pci.conf" <<'EOF'
mode = dpdk
eal-args = --no-huge
port = 0000:fe:1f.7 10.0.0.1/24
EOF
out=$(bash scripts/vipd-preflight.sh --check --config "$TMP/pci.conf" 2>&1)
rc=$?
if [ "$rc" -eq 1 ] && grep -q 'NOT READY: port 0000:fe:1f.7: no such PCI device' <<<"$out"; then
  pass preflight-missing-nic
else
  fail preflight-missing-nic "want exit 1 and 'no such PCI device', got exit $rc: $(tr '\n' ' ' <<<"$out")"
fi

[ "$NFAIL" -gt 0 ] && exit 1
[ "$NPASS" -eq 0 ] && exit 77
exit 0
