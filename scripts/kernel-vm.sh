#!/usr/bin/env bash
# usage: scripts/kernel-vm.sh fetch
#        scripts/kernel-vm.sh run [OPTIONS] -- COMMAND [ARG...]
#        scripts/kernel-vm.sh clean
#
# A throw-away qemu guest running Debian's own kernel, for tests that need what
# the host kernel cannot give them (modules such as uio_pci_generic or ip_vs,
# virtio PCI NICs for DPDK). No root filesystem is built: the guest boots a small
# busybox initramfs, mounts the host's / read-only over 9p (virtfs) on /host and
# chroots into it, so COMMAND runs the host's programs, libraries and vipd build
# unchanged, in the host's current directory (a directory under /tmp or /var/tmp,
# which the guest replaces with its own tmpfs, stays visible through a bind
# mount; under /run COMMAND runs in /).
#
#   fetch   download (apt-get download) the kernel package that linux-image-amd64
#           depends on and busybox-static into the cache and unpack them; exit 0
#           when a kernel and busybox are ready, 1 (with the reason) otherwise.
#   run     fetch, build an initramfs (busybox, /init, the modules), boot the guest,
#           run COMMAND in it and exit with COMMAND's exit status. COMMAND's output
#           (and the guest's console) is streamed to stdout.
#   clean   delete the cache.
#
# run options:
#   --modules LIST        extra kernel modules to load (comma/space separated names;
#                         dependencies from `modinfo -F depends` are added and loaded
#                         first; soft dependencies are not: name them, e.g.
#                         crc32c_generic before libcrc32c). Always loaded: virtio_pci,
#                         9pnet_virtio, 9p and their dependencies.
#   --nic NETNS:TAP[:Q[:rss]]  a virtio-net-pci NIC on tap TAP inside namespace NETNS,
#                         with Q queue pairs (default 1; Q > 1: virtio-net multi-queue, the
#                         tap must be multi_queue if it exists; ":rss": the NIC offers RSS,
#                         qemu's rss=on, hashed in qemu or its eBPF program). A missing tap is created
#                         and lives as long as qemu. NIC n (from 0) is at PCI address
#                         0000:00:0(8+n).0 with MAC 52:54:00:00:00:0(n+1); no guest
#                         driver is bound to it (virtio_net is not loaded).
#   --netns NS            run qemu itself inside namespace NS (default: where we are)
#   --mem MB              guest memory (default 1024)
#   --cpus N              guest vCPUs (default 2)
#   --timeout S           stop the guest after S seconds (default 600): exit status 124
#   --share DIR           host directory mounted read-write in the guest at /run/vm
#                         (default: a temporary directory); $VM_SHARE names it
#   --env NAME=VALUE      set in COMMAND's environment (repeatable)
#   --append ARGS         extra kernel command line
#
# In the guest COMMAND sees: /dev, /proc, /sys of the guest; tmpfs on /run, /tmp,
# /var/tmp and /dev/shm; hugetlbfs on /dev/hugepages; everything else read-only
# from the host. Environment: PATH, HOME=/root, KERNEL_VM=1, VM_SHARE=/run/vm,
# VM_NICS (the NICs' PCI addresses, space separated), and the --env values.
# The guest has no network to the outside: its only NICs are the --nic taps.
#
# Exit status of run: COMMAND's; 124 on timeout; 125 if the guest stopped without
# reporting one (boot failure, panic); 77 if the VM cannot run here (qemu missing,
# no kernel could be fetched); 2 on usage errors.
# Env: KERNEL_VM_CACHE (default <repo>/.cache/vm, git-ignored; shared with other
# guests, e.g. the IPVS tests), KERNEL_VM_ACCEL (tcg (default) or kvm: the guest
# hung under KVM on these machines, see docs/lab.md), PYTHON.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KERNEL_VM_CACHE:-$ROOT/.cache/vm}
ACCEL=${KERNEL_VM_ACCEL:-tcg}
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi
BASE_MODULES=(virtio_pci 9pnet_virtio 9p)

log() { echo "kernel-vm: $*"; }
err() { echo "kernel-vm: error: $*" >&2; }
usage() { sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//' >&2; echo "(see the comment at the top of scripts/kernel-vm.sh)" >&2; exit 2; }
unavailable() { echo "kernel-vm: UNAVAILABLE: $*" >&2; exit 77; }

# ---- fetch ----------------------------------------------------------------------
KVER=      # e.g. 6.1.0-57-amd64
KDIR=      # unpacked kernel package
BUSYBOX=

# Name of the kernel image package that linux-image-amd64 depends on.
wanted_kernel_pkg() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1
}

# apt-get download into $CACHE/debs (as root apt wants a sandbox user that can
# write there; downloading as root is fine for a cache of .deb files).
download() {
  mkdir -p "$CACHE/debs"
  (cd "$CACHE/debs" && apt-get -q -o APT::Sandbox::User=root download "$@" 2>&1) | sed 's/^/kernel-vm:   /'
  return "${PIPESTATUS[0]}"
}

do_fetch() {
  local pkg deb tmp
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    { err "apt-get/dpkg-deb not found (this needs Debian)"; return 1; }
  mkdir -p "$CACHE" || { err "cannot create the cache $CACHE"; return 1; }
  # One fetch at a time per cache (the IPVS guest may be fetching too).
  exec 8>"$CACHE/.lock"
  flock -w 600 8 || { err "cache $CACHE is locked by another fetch for 10 minutes"; return 1; }

  pkg=$(wanted_kernel_pkg)
  if [ -z "$pkg" ]; then
    log "apt does not know linux-image-amd64 (no package lists? try apt-get update); looking in the cache"
  elif [ ! -f "$CACHE/$pkg/.complete" ]; then
    log "downloading $pkg (Debian's kernel for the guest, ~70 MB) into $CACHE"
    rm -f "$CACHE/debs/${pkg}_"*.deb
    if download "$pkg" && deb=$(ls "$CACHE/debs/${pkg}_"*.deb 2>/dev/null | head -n 1) && [ -n "$deb" ]; then
      log "unpacking $(basename "$deb")"
      tmp="$CACHE/$pkg.tmp"
      rm -rf "$tmp" "${CACHE:?}/${pkg:?}"
      if dpkg-deb -x "$deb" "$tmp" && ls "$tmp"/boot/vmlinuz-* >/dev/null 2>&1; then
        # Keep only the kernel and its modules; the .deb stays for re-unpacking.
        find "$tmp/lib/modules" -name '*.ko' -printf '%f %p\n' 2>/dev/null |
          sed "s| $tmp/| |; s|\.ko | |" >"$tmp/modules.index"
        touch "$tmp/.complete"
        mv "$tmp" "$CACHE/$pkg"
        echo "$pkg" >"$CACHE/kernel.current"
      else
        rm -rf "$tmp"
        err "could not unpack $deb"
      fi
    else
      log "download of $pkg failed"
    fi
  fi
  [ -n "$pkg" ] && [ -f "$CACHE/$pkg/.complete" ] && echo "$pkg" >"$CACHE/kernel.current"
  if [ -s "$CACHE/kernel.current" ] && [ -f "$CACHE/$(cat "$CACHE/kernel.current")/.complete" ]; then
    pkg=$(cat "$CACHE/kernel.current")
  else
    # Any complete kernel in the cache, newest first.
    pkg=$(ls -d "$CACHE"/linux-image-*-amd64 2>/dev/null | sort -V | while read -r d; do
      [ -f "$d/.complete" ] && basename "$d"; done | tail -n 1)
  fi
  if [ -z "$pkg" ]; then
    err "no guest kernel: could not download Debian's linux-image package and none is cached in $CACHE"
    return 1
  fi
  KDIR=$CACHE/$pkg
  KVER=${pkg#linux-image-}

  # busybox-static installed on the host (scripts/bootstrap.sh): no download.
  if [ ! -x "$CACHE/busybox" ] && dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q "install ok installed" &&
     [ -x /bin/busybox ]; then
    cp /bin/busybox "$CACHE/busybox.tmp" && mv "$CACHE/busybox.tmp" "$CACHE/busybox"
  fi
  if [ ! -x "$CACHE/busybox" ]; then
    log "downloading busybox-static into $CACHE"
    rm -f "$CACHE/debs/busybox-static_"*.deb
    if download busybox-static && deb=$(ls "$CACHE/debs/busybox-static_"*.deb 2>/dev/null | head -n 1) && [ -n "$deb" ]; then
      tmp=$(mktemp -d "$CACHE/bb.XXXXXX")
      if dpkg-deb -x "$deb" "$tmp" && [ -x "$tmp/bin/busybox" ]; then
        cp "$tmp/bin/busybox" "$CACHE/busybox.tmp" && mv "$CACHE/busybox.tmp" "$CACHE/busybox"
      fi
      rm -rf "$tmp"
    fi
  fi
  if [ ! -x "$CACHE/busybox" ]; then
    err "no busybox for the initramfs: could not download busybox-static into $CACHE"
    return 1
  fi
  BUSYBOX=$CACHE/busybox
  flock -u 8
  log "guest kernel $KVER ($KDIR/boot/vmlinuz-$KVER), busybox $BUSYBOX"
  return 0
}

# ---- modules --------------------------------------------------------------------
declare -A MOD_DONE=()
MOD_ORDER=()
mod_path() {  # name -> path relative to $KDIR ("" if none)
  local n=${1//-/_}
  awk -v n="$n" '{ m = $1; gsub(/-/, "_", m); if (m == n) { print $2; exit } }' "$KDIR/modules.index"
}
# Adds NAME and (first) its dependencies to MOD_ORDER.
mod_add() {
  local n=${1//-/_} p d
  [ -n "${MOD_DONE[$n]:-}" ] && return 0
  MOD_DONE[$n]=1
  p=$(mod_path "$n")
  if [ -z "$p" ]; then
    if grep -q "/${n}.ko\$\|/${n//_/-}.ko\$" "$KDIR/lib/modules/$KVER/modules.builtin" 2>/dev/null; then
      return 0   # built into the kernel
    fi
    err "kernel module '$n' not found in $KVER (nor built in)"
    return 1
  fi
  for d in $(modinfo -F depends "$KDIR/$p" 2>/dev/null | tr ',' ' '); do
    mod_add "$d" || return 1
  done
  MOD_ORDER+=("$n")
}

# ---- initramfs ----------------------------------------------------------------------
write_init() {
  cat >"$1" <<'INIT'
#!/bin/busybox sh
# /init of scripts/kernel-vm.sh's guest: modules, host / over 9p, chroot, COMMAND.
/bin/busybox mkdir -p /proc /sys /dev /bin /sbin /usr/bin /usr/sbin /host /share
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
say() { echo "kernel-vm: guest: $*"; }
stop() { sync; poweroff -f; sleep 5; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/console >/dev/console 2>&1
for m in $(cat /modules/order); do
  insmod "/modules/$m.ko" || { say "insmod $m failed:"; dmesg | grep -i -e unknown -e "$m" | tail -n 5; stop; }
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose host /host ||
  { say "cannot mount the host's / over 9p"; stop; }
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 share /share ||
  { say "cannot mount the shared directory over 9p"; stop; }
mount -t devtmpfs devtmpfs /host/dev
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
# The guest's own /run, /tmp, /var/tmp; a working directory under /tmp or
# /var/tmp (a clone there) stays visible through a bind mount around them.
keep=$(cat /share/.kernel-vm/keep 2>/dev/null)
if [ -n "$keep" ]; then mkdir -p /keep && mount -o bind "/host$keep" /keep || { say "cannot keep $keep"; keep=; }; fi
for d in /host/run /host/tmp /host/var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
if [ -n "$keep" ]; then mkdir -p "/host$keep" && mount -o bind /keep "/host$keep" || say "cannot keep $keep"; fi
mkdir -p /host/dev/shm /host/dev/hugepages /host/dev/pts /host/run/vm
ln -sf /proc/self/fd /host/dev/fd
ln -sf /proc/self/fd/0 /host/dev/stdin
ln -sf /proc/self/fd/1 /host/dev/stdout
ln -sf /proc/self/fd/2 /host/dev/stderr
mount -t devpts devpts /host/dev/pts
mount -t tmpfs -o mode=1777 tmpfs /host/dev/shm
mount -t hugetlbfs -o pagesize=2M hugetlbfs /host/dev/hugepages
mount -o bind /share /host/run/vm
ip link set lo up
hostname kernel-vm
say "up $(cut -d' ' -f1 /proc/uptime) s after boot; running the command"
chroot /host /bin/bash /run/vm/.kernel-vm/cmd.sh </dev/null
rc=$?
echo "$rc" >/share/.kernel-vm/rc.tmp && mv /share/.kernel-vm/rc.tmp /share/.kernel-vm/rc
say "command exited with status $rc"
umount /host/run/vm 2>/dev/null
stop
INIT
}

build_initramfs() {  # dir out
  local d=$1 out=$2 m
  mkdir -p "$d/bin" "$d/modules" "$d/dev"
  cp "$BUSYBOX" "$d/bin/busybox"
  for m in "${MOD_ORDER[@]}"; do cp "$KDIR/$(mod_path "$m")" "$d/modules/$m.ko"; done
  printf '%s\n' "${MOD_ORDER[@]}" >"$d/modules/order"
  write_init "$d/init"
  chmod 755 "$d/init"
  (cd "$d" && find . | cpio -o -H newc --quiet | gzip -1) >"$out"
}

# ---- run ----------------------------------------------------------------------------
QPID=
SHARE_TMP=
on_run_exit() {
  if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
    log "stopping qemu (pid $QPID)"
    kill -TERM "$QPID" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$QPID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$QPID" 2>/dev/null
  fi
  [ -n "$RUNDIR" ] && rm -rf "$RUNDIR"
  [ -n "$SHARE_TMP" ] && rm -rf "$SHARE_TMP"
}

do_run() {
  local modules=() nics=() netns="" mem=1024 cpus=2 timeout=600 share="" envs=() append=""
  while [ $# -gt 0 ]; do
    case $1 in
      --modules) [ $# -ge 2 ] || usage; read -r -a m <<<"${2//,/ }"; modules+=("${m[@]}"); shift 2 ;;
      --nic) [ $# -ge 2 ] || usage; nics+=("$2"); shift 2 ;;
      --netns) [ $# -ge 2 ] || usage; netns=$2; shift 2 ;;
      --mem) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; mem=$2; shift 2 ;;
      --cpus) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; cpus=$2; shift 2 ;;
      --timeout) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || usage; timeout=$2; shift 2 ;;
      --share) [ -d "${2:-}" ] || { err "--share '${2:-}': no such directory"; exit 2; }; share=$(cd "$2" && pwd); shift 2 ;;
      --env) [[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || { err "--env wants NAME=VALUE"; exit 2; }; envs+=("$2"); shift 2 ;;
      --append) [ $# -ge 2 ] || usage; append=$2; shift 2 ;;
      --) shift; break ;;
      *) err "unknown option '$1'"; usage ;;
    esac
  done
  [ $# -ge 1 ] || { err "no COMMAND after --"; usage; }
  [ "$(id -u)" -eq 0 ] || unavailable "must run as root (9p share of /, taps in namespaces)"
  command -v qemu-system-x86_64 >/dev/null ||
    unavailable "qemu-system-x86_64 not found (Debian package qemu-system-x86; run scripts/bootstrap.sh)"
  local c
  for c in cpio gzip modinfo flock timeout "$PYTHON"; do
    command -v "$c" >/dev/null || unavailable "'$c' not found (run scripts/bootstrap.sh)"
  done
  do_fetch || unavailable "no guest kernel/busybox (see above)"

  local m
  for m in "${BASE_MODULES[@]}" "${modules[@]}"; do mod_add "$m" || exit 2; done

  RUNDIR=$(mktemp -d /tmp/kernel-vm.XXXXXX)
  trap on_run_exit EXIT
  trap 'exit 130' INT TERM
  if [ -z "$share" ]; then SHARE_TMP=$(mktemp -d /tmp/kernel-vm-share.XXXXXX); share=$SHARE_TMP; fi
  rm -rf "$share/.kernel-vm"
  mkdir -p "$share/.kernel-vm"

  # NICs: tap file descriptors from tap_exec.py, numbered from 10 in order.
  local netargs=() taps=() fd=10 i=0 spec ns tap q opt rss fds pci pcis=()
  for spec in "${nics[@]}"; do
    IFS=: read -r ns tap q opt <<<"$spec"
    q=${q:-1}
    rss=""
    if [ -z "$ns" ] || [ -z "$tap" ] || ! [[ $q =~ ^[1-9]$ ]] || { [ -n "$opt" ] && [ "$opt" != rss ]; }; then
      err "--nic '$spec': want NETNS:TAP[:QUEUES[:rss]] (1..9 queues)"; exit 2
    fi
    [ "$opt" = rss ] && rss=",rss=on"
    [ -e "/run/netns/$ns" ] || { err "--nic '$spec': no network namespace '$ns'"; exit 2; }
    taps+=(--tap "$ns:$tap:$q")
    fds=$fd; for ((k = 1; k < q; k++)); do fds+=":$((fd + k))"; done
    fd=$((fd + q))
    pci=$(printf '0000:00:%02x.0' $((8 + i)))
    pcis+=("$pci")
    if [ "$q" -gt 1 ]; then
      netargs+=(-netdev "tap,id=n$i,fds=$fds,vhost=off"
                -device "virtio-net-pci,netdev=n$i,addr=$(printf '0x%x' $((8 + i))),mac=52:54:00:00:00:0$((i + 1)),mq=on,vectors=$((2 * q + 2))$rss,romfile=")
    else
      netargs+=(-netdev "tap,id=n$i,fd=$fds,vhost=off"
                -device "virtio-net-pci,netdev=n$i,addr=$(printf '0x%x' $((8 + i))),mac=52:54:00:00:00:0$((i + 1)),romfile=")
    fi
    log "NIC $i: tap $tap in namespace $ns, $q queue(s)${rss:+, RSS}, guest PCI $pci"
    i=$((i + 1))
  done

  # COMMAND, quoted, run by the guest's /init in the chroot, in the host's
  # current directory unless the guest has its own there.
  local gdir=$PWD keep=""
  case $PWD/ in
    /tmp/?*|/var/tmp/?*)
      keep=$PWD; log "$PWD stays visible in the guest (bind mount over its own /tmp)" ;;
    /run/*|/dev/*|/proc/*|/sys/*)
      log "warning: $PWD is the guest's own (empty) directory there; COMMAND runs in /"; gdir=/ ;;
  esac
  printf '%s\n' "$keep" >"$share/.kernel-vm/keep"
  {
    echo "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root"
    echo "export KERNEL_VM=1 VM_SHARE=/run/vm VM_NICS=$(printf '%q' "${pcis[*]}")"
    for c in "${envs[@]}"; do echo "export $(printf '%q' "$c")"; done
    echo "cd $(printf '%q' "$gdir") || exit 1"
    printf 'exec'; printf ' %q' "$@"; echo
  } >"$share/.kernel-vm/cmd.sh"

  log "building the initramfs (busybox, modules: ${MOD_ORDER[*]})"
  build_initramfs "$RUNDIR/root" "$RUNDIR/initrd.gz" || { err "initramfs build failed"; exit 1; }

  local accel=(-accel "tcg,thread=multi" -cpu max)
  [ "$ACCEL" = kvm ] && accel=(-accel kvm -cpu max)
  local qemu=(qemu-system-x86_64 -nodefaults -no-user-config -machine pc "${accel[@]}"
    -smp "$cpus" -m "$mem" -display none -vga none -serial stdio -monitor none -no-reboot
    -kernel "$KDIR/boot/vmlinuz-$KVER" -initrd "$RUNDIR/initrd.gz"
    -append "console=ttyS0 loglevel=3 panic=-1 oops=panic mitigations=off $append"
    -fsdev "local,id=fs0,path=/,security_model=none,readonly=on,multidevs=remap"
    -device "virtio-9p-pci,fsdev=fs0,mount_tag=host,addr=0x10"
    -fsdev "local,id=fs1,path=$share,security_model=none"
    -device "virtio-9p-pci,fsdev=fs1,mount_tag=share,addr=0x11"
    "${netargs[@]}")
  local pre=()
  [ "${#taps[@]}" -gt 0 ] && pre=("$PYTHON" "$ROOT/scripts/vm/tap_exec.py" "${taps[@]}" --)
  [ -n "$netns" ] && pre=(ip netns exec "$netns" "${pre[@]}")
  log "booting $KVER under qemu ($ACCEL, $cpus vCPU, $mem MiB, timeout ${timeout}s${netns:+, in namespace $netns})"
  local t0=$SECONDS
  timeout -k 10 "$timeout" "${pre[@]}" "${qemu[@]}" </dev/null > >(sed -u 's/\r$//') 2>&1 &
  QPID=$!
  wait "$QPID"
  local qrc=$?
  QPID=
  local rc
  if [ -s "$share/.kernel-vm/rc" ]; then
    rc=$(cat "$share/.kernel-vm/rc")
    log "guest command exit status $rc ($((SECONDS - t0)) s in the VM)"
  elif [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
    log "TIMEOUT: guest still running after ${timeout} s; qemu killed"
    rc=124
  else
    log "guest stopped without a command exit status (qemu exit status $qrc): boot failure or panic, see the console output above"
    rc=125
  fi
  rm -rf "$share/.kernel-vm"
  return "$rc"
}

RUNDIR=
[ $# -ge 1 ] || usage
case $1 in
  fetch) [ $# -eq 1 ] || usage; do_fetch ;;
  run) shift; do_run "$@" ;;
  clean) [ $# -eq 1 ] || usage; rm -rf "$CACHE" && log "removed $CACHE" ;;
  -h|--help|help) sed -n "2,/^set -uo/p" "$0" | sed "$ d" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) usage ;;
esac
