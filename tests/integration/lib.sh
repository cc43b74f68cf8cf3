# tests/integration/lib.sh: what the lab integration tests share. Sourced (not run)
# by the scripts in tests/integration/ after they set:
#   NAME       the test's name in summaries ("seed_test(fnat)")
#   CHECKS=()  every check the script can report (printed as SKIP lines by skip_all)
# It sets ROOT (the repository, also the working directory) and PYTHON (the
# distribution's python3 unless PYTHON is set), and provides:
#   pass NAME / fail NAME DETAIL / skip NAME WHY / note TEXT   the result lines
#   skip_all WHY              every check SKIPPED (plus $SKIP_HINT, if set), exit 77
#   require_netns [bridge]    skip_all unless root with ip(8) and network namespaces
#                             (with "bridge": veth pairs and bridges too)
#   find_bin NAME             the binary in $VIPD_BUILD_DIR (default build)
#   require_vipd              sets VIPD and VIPCTL (VIPD_BIN/VIPCTL_BIN win) or fails "build"
#   stop_pid PID [SIGNAL]     signal (TERM), up to 5 s, then KILL; reaps it
#   lab_up                    scripts/lab.sh up (LAB_PREFIX must be exported), fails "lab-up"
#   lab_kernel_lb             for the kernel modes (iptables, ipvs): ${P}lb gets kernel
#                             addresses (c0 10.0.0.1/24, p0 10.244.0.1/16), IPv4
#                             forwarding (that namespace only) and the service range
#                             routed to a dummy svc0 (to p0 where there is no dummy
#                             driver), so a VIP no rule claims goes nowhere; with
#                             LAB_IPV6=1 (exported before lab_up) also IPv6 there:
#                             c0 fd00:10::1/64, p0 fd00:244::1/64 (nodad), IPv6
#                             forwarding and fd00:96::/112 routed the same way
#   inlb CMD...               runs CMD in the ${P}lb namespace
# For the kernel-mode seed scenario (iptables_test.sh, nftables_test.sh):
#   kernel_write_slice SVC FILE IP...  an EndpointSlice of SVC (http 8080/TCP,
#                             dns 9053/UDP) with the ready endpoints IP...
#   kernel_seed_manifests     $TMP/manifests: the demo service (db, empty) with
#                             the four lab pods, and `sticky` (ClientIP, 300 s)
#   kernel_write_slice6 FILE IP...  db6's EndpointSlice (addressType IPv6, same ports)
#   kernel_v6_manifests       adds db6 fd00:96::100 (TCP 8080, UDP 9053) in front of
#                             KERNEL_POD6 (the pods' IPv6 addresses with LAB_IPV6=1)
#                             and empty6 fd00:96::101 (no endpoints; empty6.yaml);
#                             1 (files removed, reason printed) if this vipd's
#                             sources give no IPv6 entry for them
#   kernel_start_vipd MODE METHOD  vipd --mode MODE in ${P}lb on $TMP/manifests
#                             (admin $TMP/admin.sock, metrics :10249, health
#                             :10256, log $TMP/vipd.log); sets VIPD_PID
#   kernel_wait_synced        prints the generation once >= 1 after a sync
#                             (up to ~30 s); 1 if vipd died or timed out
#   vipctl ARGS...            vipctl on $TMP/admin.sock (ADMIN_SOCK overrides)
#   status_json, generation_of JSON, generation, json_field JSON KEY, vipd_alive
#   wait_generation MIN [TENTHS]  0 once the generation is >= MIN; 1 if vipd died;
#                             2 after TENTHS x 0.1 s (default 300)
#   client ARGS...            scripts/lab/client.py in ${P}client
#   judge RESULT EXPR         "" if the Python EXPR holds for client.py's RESULT
#                             (r, pods, n(pod)), else the result as failure detail
#   replace_file DST SRC      atomic replacement (copy to $TMP/stage, rename)
#   slice_without FILE IP     rewrites an EndpointSlice manifest without the endpoint
#                             with address IP, atomically; prints the rename time (µs)
#                             (scripts/lab/slice_without.py)
#   drop_reasons JSON         per-reason drop totals of `vipctl stats --json`, as JSON
# The test API server (tests/kube/fake_apiserver.py), for the scripts that drive
# vipd's Kubernetes source (fault_test, kube_test, leak_test):
#   api_init [NS]             sets API_NS (the namespace it runs in; default ${P}lb),
#                             API_PORT (HTTPS, 20000 + $$ % 20000), CTL_PORT (its
#                             control port, API_PORT + 1) and API_PID= (stop it in
#                             cleanup_extra: stop_pid "$API_PID")
#   start_api ARGS...         starts it in $API_NS on 127.0.0.1 with the PKI of
#                             tests/kube/gen_certs.sh in $TMP/pki, state $TMP/api-state.json,
#                             log $TMP/api.log, --bookmark-s ${API_BOOKMARK_S:-2},
#                             --token $API_TOKEN if set, then ARGS; sets API_PID;
#                             0 once the control port answers, 1 after 10 s
#   ctl PATH [JSON]           POST JSON (default {}) to the control port's /PATH
#   api_stats / api_stat FIELD / api_ge FIELD N
#                             the control port's /stats; one field of it; 0 if that
#                             field is >= N
#   api_kubeconfig FILE       writes a kubeconfig for that server (client certificate
#                             auth; paths relative to FILE's directory, so FILE is
#                             $TMP/something)
#   slice_json [--dns] NAME SERVICE ADDRESS...
#                             an EndpointSlice (JSON) of SERVICE in namespace default
#                             with the ready endpoints ADDRESS... on node lab-node,
#                             port http 8080/TCP (--dns: also dns 9053/UDP)
#   lib_cleanup               the EXIT trap: vipd log tail on failure, cleanup_extra
#                             (if the script defines it), vipd stopped, lab down,
#                             $TMP removed, the summary line, exit 1 on any failure
# Scripts keep their own checks; see seed_test.sh for the pattern.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 1
if [ -z "${PYTHON:-}" ]; then if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi; fi
NPASS=0
NFAIL=0
VIPD_PID=
TMP=${TMP:-}
T_START=$(date +%s)

pass() { echo "PASS: $1"; NPASS=$((NPASS + 1)); }
fail() { echo "FAIL: $1: $2"; NFAIL=$((NFAIL + 1)); }
skip() { echo "SKIP: $1: $2"; echo "!!! $NAME: $1 SKIPPED: $2" >&2; }
note() { echo "    $*"; }

skip_all() {
  local c
  for c in "${CHECKS[@]}"; do echo "SKIP: $c: $1"; done
  echo "!!! $NAME: all ${#CHECKS[@]} checks SKIPPED: $1${SKIP_HINT:+ -- $SKIP_HINT}" >&2
  exit 77
}

require_netns() {
  [ "$(id -u)" -eq 0 ] || skip_all "not root (network namespaces need root)"
  command -v ip >/dev/null 2>&1 || skip_all "'ip' (iproute2) not installed"
  local probe="vipd-probe-$$"
  ip netns add "$probe" 2>/dev/null || skip_all "cannot create network namespaces"
  if [ "${1:-}" = bridge ]; then
    if ! ip -n "$probe" link add name pa type veth peer name pb 2>/dev/null ||
       ! ip -n "$probe" link add name pbr type bridge 2>/dev/null; then
      ip netns del "$probe" 2>/dev/null
      skip_all "cannot create veth pairs or bridges in a namespace"
    fi
  fi
  ip netns del "$probe"
}

# require_bird2: BIRD and BIRDC set to BIRD 2's binaries, or the test is
# skipped (skip_all) saying what is missing.
require_bird2() {
  BIRD=$(command -v bird || true)
  BIRDC=$(command -v birdc || true)
  [ -n "$BIRD" ] && [ -n "$BIRDC" ] || skip_all "BIRD 2 (bird, birdc) is not installed"
  grep -q 'BIRD version 2\.' <<<"$("$BIRD" --version 2>&1)" || skip_all "bird is not BIRD 2: $("$BIRD" --version 2>&1 | head -n 1)"
}

find_bin() { local b d=${VIPD_BUILD_DIR:-build}; for b in "$d/$1" "$d/cmd/$1"; do [ -x "$b" ] && { echo "$b"; return 0; }; done; return 1; }
require_vipd() {
  VIPD=${VIPD_BIN:-$(find_bin vipd)}
  VIPCTL=${VIPCTL_BIN:-$(find_bin vipctl)}
  if [ -z "$VIPD" ] || [ -z "$VIPCTL" ]; then
    fail build "vipd/vipctl binaries not found under ${VIPD_BUILD_DIR:-build}/ (run: meson setup build && ninja -C build)"
    exit 1
  fi
}

stop_pid() {
  local pid=$1 _
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -"${2:-TERM}" "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  { wait "$pid"; } 2>/dev/null
  return 0
}

lab_up() {
  note "$NAME: lab prefix '$P', temp dir $TMP"
  if ! scripts/lab.sh up "$@" >"$TMP/lab.log" 2>&1; then
    fail lab-up "scripts/lab.sh up failed: $(tail -n 3 "$TMP/lab.log" | tr '\n' ' ')"
    exit 1
  fi
}

lab_kernel_lb() {
  if ! { ip -n "${P}lb" addr add 10.0.0.1/24 dev c0 &&
         ip -n "${P}lb" addr add 10.244.0.1/16 dev p0 &&
         inlb sysctl -qw net.ipv4.ip_forward=1 >/dev/null; }; then
    fail lab-up "could not give the lb namespace its kernel addresses / forwarding"
    exit 1
  fi
  if [ "${LAB_IPV6:-0}" = 1 ] &&
     ! { inlb sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 \
           net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
           net.ipv6.conf.c0.disable_ipv6=0 net.ipv6.conf.p0.disable_ipv6=0 \
           net.ipv6.conf.all.forwarding=1 >/dev/null &&
         ip -n "${P}lb" addr add fd00:10::1/64 dev c0 nodad &&
         ip -n "${P}lb" addr add fd00:244::1/64 dev p0 nodad; }; then
    fail lab-up "could not give the lb namespace its IPv6 addresses / forwarding"
    exit 1
  fi
  local dev=svc0
  if ip -n "${P}lb" link add name svc0 type dummy 2>/dev/null; then
    ip -n "${P}lb" link set dev svc0 up
  else
    note "no dummy interfaces here: the service range is routed to p0 instead"
    dev=p0
  fi
  ip -n "${P}lb" route add 10.96.0.0/12 dev "$dev"
  [ "${LAB_IPV6:-0}" != 1 ] || ip -n "${P}lb" -6 route add fd00:96::/112 dev "$dev"
}

inlb() { ip netns exec "${P}lb" "$@"; }

KERNEL_PODS=(10.244.1.15 10.244.2.88 10.244.3.12 10.244.3.44)
kernel_write_slice() {
  local svc=$1 file=$2 a
  shift 2
  {
    echo "apiVersion: discovery.k8s.io/v1"
    echo "kind: EndpointSlice"
    echo "metadata: {name: $svc-1, namespace: default, labels: {kubernetes.io/service-name: $svc}}"
    echo "addressType: IPv4"
    echo "ports: [{name: http, port: 8080, protocol: TCP}, {name: dns, port: 9053, protocol: UDP}]"
    echo "endpoints:"
    for a in "$@"; do echo "  - {addresses: [\"$a\"], conditions: {ready: true}}"; done
  } >"$file"
}
kernel_seed_manifests() {
  mkdir -p "$TMP/manifests" "$TMP/stage"
  cp config/demo/manifests/service.yaml "$TMP/manifests/"
  kernel_write_slice db "$TMP/manifests/endpointslice-db.yaml" "${KERNEL_PODS[@]}"
  cat >"$TMP/manifests/sticky.yaml" <<'EOF_STICKY'
apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: default}
spec:
  clusterIP: 10.96.0.102
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 300}}
  ports: [{name: http, port: 8080, protocol: TCP}]
EOF_STICKY
  kernel_write_slice sticky "$TMP/manifests/sticky-slice.yaml" "${KERNEL_PODS[@]}"
}
KERNEL_POD6=(fd00:244::1:15 fd00:244::2:88 fd00:244::3:12 fd00:244::3:44)
kernel_write_slice6() {
  local file=$1 a
  shift
  {
    echo "apiVersion: discovery.k8s.io/v1"
    echo "kind: EndpointSlice"
    echo "metadata: {name: db6-1, namespace: default, labels: {kubernetes.io/service-name: db6}}"
    echo "addressType: IPv6"
    echo "ports: [{name: http, port: 8080, protocol: TCP}, {name: dns, port: 9053, protocol: UDP}]"
    echo "endpoints:"
    for a in "$@"; do echo "  - {addresses: [\"$a\"], conditions: {ready: true}}"; done
  } >"$file"
}
kernel_v6_manifests() {
  local name ip ports
  for name in db6 empty6; do
    if [ $name = db6 ]; then ip=fd00:96::100 ports='{name: http, port: 8080, protocol: TCP}, {name: dns, port: 9053, protocol: UDP}'
    else ip=fd00:96::101 ports='{name: http, port: 80, protocol: TCP}, {name: dns, port: 53, protocol: UDP}'; fi
    printf '%s\n' "apiVersion: v1" "kind: Service" "metadata: {name: $name, namespace: default}" "spec:" \
      "  type: ClusterIP" "  clusterIP: $ip" "  clusterIPs: [$ip]" "  ipFamilies: [IPv6]" \
      "  ipFamilyPolicy: SingleStack" "  ports: [$ports]" >"$TMP/manifests/$([ $name = db6 ] && echo service6 || echo empty6).yaml"
  done
  kernel_write_slice6 "$TMP/manifests/endpointslice-db6.yaml" "${KERNEL_POD6[@]}"
  if ! grep -q '"vip":"fd00:96::100"' <<<"$("$VIPD" --dry-run --manifests-dir "$TMP/manifests" 2>/dev/null)"; then
    echo "this vipd's sources give no IPv6 ServiceTable entry for an IPv6 Service (IPv6 ignored)"
    rm -f "$TMP/manifests/service6.yaml" "$TMP/manifests/empty6.yaml" "$TMP/manifests/endpointslice-db6.yaml"
    return 1
  fi
}
kernel_start_vipd() {
  ip netns exec "${P}lb" "$VIPD" --mode "$1" --forward-method "$2" \
    --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
    --metrics-address 127.0.0.1:10249 --health-address 127.0.0.1:10256 \
    </dev/null >>"$TMP/vipd.log" 2>&1 &
  VIPD_PID=$!
}
kernel_wait_synced() {
  local st g
  for _ in $(seq 1 300); do
    vipd_alive || return 1
    if st=$(status_json); then
      g=$(generation_of "$st")
      if [ -n "$g" ] && [ "$g" -ge 1 ] && [ "$(json_field "$st" syncs)" -ge 1 ] 2>/dev/null; then echo "$g"; return 0; fi
    fi
    sleep 0.1
  done
  return 1
}
vipctl() { "$VIPCTL" --socket "${ADMIN_SOCK:-$TMP/admin.sock}" "$@"; }
status_json() { vipctl status --json 2>/dev/null; }
generation_of() { [[ $1 =~ \"generation\"[[:space:]]*:[[:space:]]*([0-9]+) ]] && echo "${BASH_REMATCH[1]}"; }
generation() { local st; st=$(status_json) && generation_of "$st"; }
json_field() { "$PYTHON" -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("" if v is None else v)' "$1" "$2" 2>/dev/null; }
vipd_alive() { [ -n "$VIPD_PID" ] && kill -0 "$VIPD_PID" 2>/dev/null; }

wait_generation() {
  local min=$1 tries=${2:-300} g _
  for _ in $(seq 1 "$tries"); do
    vipd_alive || return 1
    g=$(generation) && [ -n "$g" ] && [ "$g" -ge "$min" ] && return 0
    sleep 0.1
  done
  return 2
}

client() { ip netns exec "${P}client" "$PYTHON" scripts/lab/client.py "$@"; }
judge() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    print(sys.argv[1] or "no result"); sys.exit()
pods = r.get("by_pod", {})
n = lambda p: pods.get(p, 0)
try:
    ok = eval(sys.argv[2])
except Exception as e:  # a broken expression or result must fail, not pass
    print("cannot judge (%s: %s): %s" % (type(e).__name__, e, sys.argv[1] or "no result")); sys.exit()
print("" if ok else sys.argv[1])
PY
}

replace_file() {
  mkdir -p "$TMP/stage"
  cp "$2" "$TMP/stage/$(basename "$1")" && mv -f "$TMP/stage/$(basename "$1")" "$1"
}

slice_without() {
  mkdir -p "$TMP/stage"
  "$PYTHON" scripts/lab/slice_without.py "$1" "$2" "$TMP/stage"
}

drop_reasons() {
  "$PYTHON" -c '
import collections, json, sys
tot = collections.Counter()
for w in json.loads(sys.argv[1])["workers"]:
    tot.update(w["drop_reasons"])
print(json.dumps(dict(tot)))' "$1" 2>/dev/null
}

api_init() {
  API_NS=${1:-${P}lb}
  API_PORT=$((20000 + $$ % 20000))
  CTL_PORT=$((API_PORT + 1))
  API_PID=
}
ctl() { ip netns exec "$API_NS" curl -s -m 10 -X POST --data-binary "${2:-{\}}" "http://127.0.0.1:$CTL_PORT/$1"; }
api_stats() { ip netns exec "$API_NS" curl -s -m 5 "http://127.0.0.1:$CTL_PORT/stats"; }
api_stat() { json_field "$(api_stats)" "$1"; }
api_ge() { local v; v=$(api_stat "$1") && [ -n "$v" ] && [ "$v" -ge "$2" ]; }
start_api() {
  local _
  # Not through a function: $! must be the server itself (ip netns exec execs it).
  ip netns exec "$API_NS" "$PYTHON" tests/kube/fake_apiserver.py --port "$API_PORT" --ctl-port "$CTL_PORT" \
    --cert "$TMP/pki/server.crt" --key "$TMP/pki/server.key" --client-ca "$TMP/pki/ca.crt" \
    ${API_TOKEN:+--token "$API_TOKEN"} --state "$TMP/api-state.json" --bookmark-s "${API_BOOKMARK_S:-2}" "$@" \
    >>"$TMP/api.log" 2>&1 &
  API_PID=$!
  for _ in $(seq 1 100); do grep -q '"rv"' <<<"$(api_stats 2>/dev/null)" && return 0; sleep 0.1; done
  return 1
}
api_kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
current-context: lab
contexts:
- name: lab
  context: {cluster: lab, user: vipd}
clusters:
- name: lab
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: pki/ca.crt
users:
- name: vipd
  user:
    client-certificate: pki/client.crt
    client-key: pki/client.key
EOF
}
slice_json() {
  local dns=0
  if [ "${1:-}" = --dns ]; then dns=1; shift; fi
  "$PYTHON" - "$dns" "$@" <<'PY'
import json, sys
ports = [{"name": "http", "port": 8080, "protocol": "TCP"}]
if sys.argv[1] == "1":
    ports.append({"name": "dns", "port": 9053, "protocol": "UDP"})
print(json.dumps({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
  "metadata": {"name": sys.argv[2], "namespace": "default", "labels": {"kubernetes.io/service-name": sys.argv[3]}},
  "addressType": "IPv4", "ports": ports,
  "endpoints": [{"addresses": [a], "conditions": {"ready": True}, "nodeName": "lab-node"} for a in sys.argv[4:]]}))
PY
}

lib_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$NFAIL" -gt 0 ] && [ -n "$TMP" ] && [ -s "$TMP/vipd.log" ]; then
    note "---- last lines of the vipd log ----"
    tail -n 30 "$TMP/vipd.log" | sed 's/^/    | /'
  fi
  declare -F cleanup_extra >/dev/null && cleanup_extra
  stop_pid "$VIPD_PID"
  [ -n "${LAB_PREFIX:-}" ] && scripts/lab.sh down >/dev/null 2>&1
  [ -n "$TMP" ] && rm -rf "$TMP"
  note "$NAME: $NPASS passed, $NFAIL failed ($(( $(date +%s) - T_START )) s)"
  [ "$NFAIL" -gt 0 ] && exit 1
  exit "$rc"
}
lib_traps() {
  trap lib_cleanup EXIT
  trap 'fail interrupted "signal received"; exit 1' INT TERM
}
