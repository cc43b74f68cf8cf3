#!/usr/bin/env bash
# usage: tests/integration/vm_test.sh
#
# vipd on virtio PCI NICs (DPDK net_virtio PMD, 2 queues per NIC, 2 workers) in a
# qemu guest booted from Debian's kernel, with the seed scenario and the
# multi-queue redirect check sent through it from the namespace lab. The test
# itself is scripts/vm-test.sh (see its header); this wrapper is what
# scripts/test.sh runs. Exit status 77, with SKIP lines and a loud reason, when it
# cannot run here: not root, no qemu-system-x86_64, no taps, or no guest kernel
# (apt-get download failed and nothing is cached in .cache/vm).
# Takes about 2-3 minutes under TCG on two loaded cores (the time is printed).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../../scripts/vm-test.sh" "$@"
