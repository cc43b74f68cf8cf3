# scripts/kernel-vm-host.sh: the host side shared by the tests that boot
# Debian's kernel with scripts/kernel-vm.sh and run vipd inside the guest
# (scripts/vm-test.sh, tests/integration/ipvs_test.sh). Sourced, not run, from
# the repository root, after the caller has defined skip_all WHY and
# pass/fail/note and set NPASS/NFAIL.
#   vm_fetch_kernel   the guest kernel and busybox, downloaded once into the cache
#                     (apt-get download); skip_all when neither works
#   vm_guest_bins     sets VIPD and VIPCTL to absolute paths of the binaries in
#                     $VIPD_BUILD_DIR (default build; VIPD_BIN/VIPCTL_BIN win); fails
#                     "build" and exits when they are missing or where the guest
#                     cannot see them (it has its own /tmp, /var/tmp and /run; only
#                     the checkout stays visible there, even under /tmp)

vm_fetch_kernel() {
  local fetch_out
  if ! fetch_out=$(scripts/kernel-vm.sh fetch 2>&1); then
    echo "$fetch_out" | sed 's/^/    /'
    skip_all "no guest kernel: Debian's linux-image/busybox-static could not be downloaded and none is cached (${KERNEL_VM_CACHE:-.cache/vm})"
  fi
  grep -v 'guest kernel ' <<<"$fetch_out" | sed 's/^/    /'   # download progress, if any
}

vm_guest_bins() {
  local b=${VIPD_BUILD_DIR:-build} bin
  _vm_find_bin() {
    local c
    for c in "$b/$1" "$b/cmd/$1"; do [ -x "$c" ] && { echo "$(cd "$(dirname "$c")" && pwd)/$1"; return 0; }; done
    return 1
  }
  VIPD=${VIPD_BIN:-$(_vm_find_bin vipd)}
  VIPCTL=${VIPCTL_BIN:-$(_vm_find_bin vipctl)}
  if [ -z "$VIPD" ] || [ -z "$VIPCTL" ]; then
    fail build "vipd/vipctl binaries not found under $b/ (run: meson setup $b && ninja -C $b)"
    exit 1
  fi
  for bin in "$VIPD" "$VIPCTL"; do
    case $bin in
      "$ROOT"/*) ;;
      /tmp/*|/var/tmp/*|/run/*)
        fail build "$bin: the guest has its own /tmp, /var/tmp and /run; build inside the checkout or elsewhere"
        exit 1 ;;
    esac
  done
}
