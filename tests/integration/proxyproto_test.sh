#!/usr/bin/env bash
# usage: tests/integration/proxyproto_test.sh
# timeout: 300
#
# The PROXY protocol (vipd.io/proxy-protocol) end to end, vipd in dpdk mode with
# full NAT in the namespace lab (scripts/lab.sh), one lab for everything:
#   pod1: nginx `listen ... proxy_protocol` (service pp-v1, 10.96.0.110:80, v1),
#         logging $proxy_protocol_addr, in front of an HTTP backend on its lo
#   pod2: HAProxy `bind ... accept-proxy` (pp-v2, 10.96.0.111:80, v2), logging %ci
#   pod3: a raw server-first echo server (scripts/lab/ppserver.py raw) behind
#         pp-raw1 (v1, 10.96.0.112), pp-raw2 (v2, 10.96.0.113) and pp-plain (no
#         annotation, 10.96.0.114): the bytes it got come back to the client,
#         which checks there is exactly one header and then its own bytes
#   the demo service db (10.96.0.100:8080, no annotation) as before.
# IPv6 in the same lab (LAB_IPV6=1; vipd gets `--port-ipv6` and the full-NAT
# local address fd00:244::ff:1, `--fnat-local-addrs6`): pp6-v1 [fd00:96::110]:80
# (v1) to a second nginx server block on [fd00:244::1:15]:8091, pp6-v2
# [fd00:96::111]:80 (v2) to a second HAProxy frontend on [fd00:244::2:88]:8092,
# pp6-raw1 / pp6-raw2 [fd00:96::112] / [fd00:96::113] (v1 / v2) to the raw echo
# server on [fd00:244::3:12]:8093 / 8094. The v6- checks: nginx and HAProxy log
# the client's IPv6 address fd00:10::2 (read from `PROXY TCP6` / the AF_INET6 v2
# header), 8 MiB both ways byte-exact, and exactly one header on the raw server.
# Transfers of 8 MiB both ways are compared by sha256, also with 2 % random loss
# (iptables statistic) on the pods' links in both directions, and with reordering
# there: this host has no netem qdisc, so scripts/lab/reorder_relay.py (AF_PACKET,
# in the switch namespace) relays pod1..3's links and sends every 7th frame of each
# direction after its successor; the check fails unless every direction of every
# relayed link was reordered.
# Each check prints "PASS: <name>" / "FAIL: <name>: <detail>" / "SKIP: ...";
# exit 0, 1 on failures, 77 when it cannot run here (not root, no namespaces,
# nginx or haproxy missing: scripts/bootstrap.sh installs them).
set -uo pipefail

NAME="proxyproto_test"
CHECKS=(vipd-starts table-shows-proxy-protocol vipctl-list-shows-proxy-protocol
        v1-client-address v2-client-address v1-download v1-upload v2-download v2-upload
        raw-v1-header-once raw-v2-header-once raw-server-first-no-client-bytes plain-no-header
        plain-service-unchanged loss-v1-transfer loss-v2-transfer loss-header-once
        reorder-transfer reorder-header-once
        v6-v1-client-address v6-v2-client-address v6-v1-transfer v6-v2-transfer
        v6-raw-v1-header-once v6-raw-v2-header-once vipd-alive)
SKIP_HINT="run as root with network namespaces, nginx and haproxy (scripts/bootstrap.sh)"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
require_vipd
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HAPROXY=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$NGINX" ] || skip_all "nginx is not installed (scripts/bootstrap.sh installs nginx-light)"
[ -x "$HAPROXY" ] || skip_all "haproxy is not installed (scripts/bootstrap.sh installs it)"
command -v curl >/dev/null 2>&1 || skip_all "curl is not installed"

export LAB_PREFIX="vpp$$-"
export LAB_IPV6=1
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-proxyproto.XXXXXX)
CONF=config/demo/vipd.conf
SIZE=$((8 * 1024 * 1024))
PP="$PYTHON scripts/lab/ppserver.py"
POD1=10.244.1.15
POD2=10.244.2.88
POD3=10.244.3.12
POD1_6=fd00:244::1:15
POD2_6=fd00:244::2:88
POD3_6=fd00:244::3:12
lib_traps

# ---- lab, manifests, backends ----------------------------------------------------
lab_up
mkdir -p "$TMP/manifests" "$TMP/stage" "$TMP/nginx"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
svc() {  # name vip annotation(or "") target-ip target-port
  local ann=""
  [ -n "$3" ] && ann=", annotations: {vipd.io/proxy-protocol: $3}"
  cat >"$TMP/manifests/$1.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: default$ann}
spec: {clusterIP: $2, ports: [{name: http, port: 80, protocol: TCP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $1-1, namespace: default, labels: {kubernetes.io/service-name: $1}}
addressType: IPv4
ports: [{name: http, port: $5, protocol: TCP}]
endpoints: [{addresses: ["$4"], conditions: {ready: true}}]
EOF
}
svc pp-v1 10.96.0.110 v1 "$POD1" 8081
svc pp-v2 10.96.0.111 v2 "$POD2" 8082
svc pp-raw1 10.96.0.112 v1 "$POD3" 8083
svc pp-raw2 10.96.0.113 v2 "$POD3" 8084
svc pp-plain 10.96.0.114 "" "$POD3" 8085
svc6() {  # name vip annotation target-ip target-port (IPv6)
  cat >"$TMP/manifests/$1.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: $1, namespace: default, annotations: {vipd.io/proxy-protocol: $3}}
spec: {clusterIP: "$2", clusterIPs: ["$2"], ipFamilies: [IPv6], ipFamilyPolicy: SingleStack,
       ports: [{name: http, port: 80, protocol: TCP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: $1-1, namespace: default, labels: {kubernetes.io/service-name: $1}}
addressType: IPv6
ports: [{name: http, port: $5, protocol: TCP}]
endpoints: [{addresses: ["$4"], conditions: {ready: true}}]
EOF
}
svc6 pp6-v1 fd00:96::110 v1 "$POD1_6" 8091
svc6 pp6-v2 fd00:96::111 v2 "$POD2_6" 8092
svc6 pp6-raw1 fd00:96::112 v1 "$POD3_6" 8093
svc6 pp6-raw2 fd00:96::113 v2 "$POD3_6" 8094

inpod() { local n=$1; shift; ip netns exec "${P}pod$n" "$@"; }
inpod 1 $PP http --listen 127.0.0.1:9000 </dev/null >>"$TMP/http1.log" 2>&1 &
inpod 2 $PP http --listen 127.0.0.1:9000 </dev/null >>"$TMP/http2.log" 2>&1 &
inpod 3 $PP raw --listen "$POD3:8083" --listen "$POD3:8084" --listen "$POD3:8085" \
  --listen "[$POD3_6]:8093" --listen "[$POD3_6]:8094" \
  --pidfile "$TMP/raw.pid" </dev/null >>"$TMP/raw.log" 2>&1 &
cat >"$TMP/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
user root;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log;
events { worker_connections 256; }
http {
  log_format pp 'client=\$proxy_protocol_addr:\$proxy_protocol_port remote=\$remote_addr status=\$status';
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
  client_max_body_size 64m;
  server {
    listen $POD1:8081 proxy_protocol;
    access_log $TMP/nginx/access.log pp;
    location / { proxy_pass http://127.0.0.1:9000; }
  }
  server {
    listen [$POD1_6]:8091 proxy_protocol;
    access_log $TMP/nginx/access6.log pp;
    location / { proxy_pass http://127.0.0.1:9000; }
  }
}
EOF
inpod 1 "$NGINX" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" </dev/null >>"$TMP/nginx/out.log" 2>&1 &
cat >"$TMP/haproxy.cfg" <<EOF
global
  log stdout format raw local0
defaults
  mode http
  log global
  timeout connect 5s
  timeout client 60s
  timeout server 60s
frontend fe
  bind $POD2:8082 accept-proxy
  log-format "client=%ci:%cp status=%ST"
  default_backend be
frontend fe6
  bind ipv6@$POD2_6:8092 accept-proxy
  log-format "client6=%ci:%cp status=%ST"
  default_backend be
backend be
  server s1 127.0.0.1:9000
EOF
inpod 2 "$HAPROXY" -db -f "$TMP/haproxy.cfg" </dev/null >>"$TMP/haproxy.log" 2>&1 &

ip netns exec "${P}lb" "$VIPD" --config "$CONF" --forward-method fnat \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  "--eal-args=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1) --file-prefix ${P}vipd" \
  --port-ipv6 "fd00:10::1/64 via fe80::2,fd00:244::1" --fnat-local-addrs6 fd00:244::ff:1 \
  </dev/null >"$TMP/vipd.log" 2>&1 &
VIPD_PID=$!
if wait_generation 1 300; then
  pass vipd-starts
else
  fail vipd-starts "no generation >= 1 within 30 s: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
  exit 1
fi
# The backends listen once their ports answer in their own namespace.
for _ in $(seq 1 50); do
  inpod 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/9000" 2>/dev/null &&
    inpod 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/9000" 2>/dev/null &&
    inpod 1 bash -c "exec 3<>/dev/tcp/$POD1/8081" 2>/dev/null &&
    inpod 2 bash -c "exec 3<>/dev/tcp/$POD2/8082" 2>/dev/null &&
    inpod 1 bash -c "exec 3<>/dev/tcp/$POD1_6/8091" 2>/dev/null &&
    inpod 2 bash -c "exec 3<>/dev/tcp/$POD2_6/8092" 2>/dev/null && [ -s "$TMP/raw.pid" ] && break
  sleep 0.1
done
sleep 0.3
: >"$TMP/nginx/access.log"   # the readiness probes above sent no header
: >"$TMP/nginx/access6.log"
: >"$TMP/haproxy.log"

# ---- what the control plane says -----------------------------------------------
d=$("$PYTHON" - "$(vipctl dump 2>&1)" <<'PY'
import json, sys
try:
    svcs = {s["name"]: s for s in json.loads(sys.argv[1])["services"]}
except Exception as e:
    print("no table: %s" % e); sys.exit()
want = {"default/pp-v1:http": "v1", "default/pp-v2:http": "v2", "default/pp-plain:http": "",
        "default/db:http": "", "default/db:dns": "",
        "default/pp6-v1:http": "v1", "default/pp6-v2:http": "v2"}
bad = ["%s: %r (want %r)" % (k, svcs.get(k, {}).get("proxy_protocol", "<absent>"), v)
       for k, v in want.items() if svcs.get(k, {}).get("proxy_protocol", "<absent>") != v]
print("; ".join(bad))
PY
)
if [ -z "$d" ]; then pass table-shows-proxy-protocol; else fail table-shows-proxy-protocol "$d"; fi
out=$(vipctl list 2>&1)
if grep -q '^TCP  10\.96\.0\.110:80 .*proxy-protocol v1' <<<"$out" &&
   grep -q '^TCP  10\.96\.0\.111:80 .*proxy-protocol v2' <<<"$out" &&
   ! grep -q '10\.96\.0\.114:80 .*proxy-protocol' <<<"$out"; then
  pass vipctl-list-shows-proxy-protocol
else
  fail vipctl-list-shows-proxy-protocol "$(grep '10\.96\.0\.11' <<<"$out" | tr '\n' ' ')"
fi

# ---- transfers --------------------------------------------------------------------
$PP blob "$SIZE" >"$TMP/blob"
WANT=$(sha256sum <"$TMP/blob" | cut -d' ' -f1)
download() {  # vip -> "" or a failure detail
  local got
  got=$(ip netns exec "${P}client" curl -gsS -m 90 "http://$1/big?n=$SIZE" 2>"$TMP/curl.err" | sha256sum | cut -d' ' -f1)
  [ "$got" = "$WANT" ] || echo "sha256 $got, want $WANT ($(head -c 200 "$TMP/curl.err"))"
}
upload() {
  local got
  got=$(ip netns exec "${P}client" curl -gsS -m 90 -H 'Content-Type: application/octet-stream' \
        --data-binary @"$TMP/blob" "http://$1/up" 2>"$TMP/curl.err")
  [ "$got" = "$WANT" ] || echo "backend saw sha256 '$got', want $WANT ($(head -c 200 "$TMP/curl.err"))"
}
check() {  # name detail
  if [ -z "$2" ]; then pass "$1"; else fail "$1" "$2"; fi
}
check v1-download "$(download 10.96.0.110)"
check v1-upload "$(upload 10.96.0.110)"
check v2-download "$(download 10.96.0.111)"
check v2-upload "$(upload 10.96.0.111)"

# Every request logged with the client namespace's address (10.0.0.2), read from
# the header: the TCP peer is one of vipd's full-NAT local addresses.
addresses() {  # log name
  local f=$1 n bad
  n=$(grep -ac 'client=' "$f" 2>/dev/null)
  # tr: HAProxy's log starts with a hole of NULs after the truncation above.
  bad=$(tr -d '\0' <"$f" | grep -a 'client=' | grep -v 'client=10\.0\.0\.2:' | head -n 2)
  if [ "${n:-0}" -lt 2 ]; then echo "$n request(s) logged, want >= 2: $(tail -n 3 "$f" | tr '\n' ' ')"
  elif [ -n "$bad" ]; then echo "logged a client other than 10.0.0.2: $bad"; fi
}
note "nginx: $(head -n 1 "$TMP/nginx/access.log")"
note "haproxy: $(grep -a 'client=' "$TMP/haproxy.log" | tr -d '\0' | head -n 1)"
d=$(addresses "$TMP/nginx/access.log")
[ -z "$d" ] && grep -aq 'remote=10\.0\.0\.2 ' "$TMP/nginx/access.log" && d="the TCP peer itself was the client: no full NAT?"
check v1-client-address "$d"
check v2-client-address "$(addresses "$TMP/haproxy.log")"

# ---- exactly one header, server first ------------------------------------------------
raw() {  # vip version bytes -> "" or a failure detail
  local r
  r=$(ip netns exec "${P}client" $PP raw-client "$1:80" --bytes "$3" --expect "$2" --timeout 60)
  note "raw $1 $2 $3 bytes: $(cut -c1-220 <<<"$r")" >&2
  judge "$r" 'r["ok"]'
}
check raw-v1-header-once "$(raw 10.96.0.112 v1 100000)"
check raw-v2-header-once "$(raw 10.96.0.113 v2 100000)"
d=$(raw 10.96.0.112 v1 0)
[ -z "$d" ] && d=$(raw 10.96.0.113 v2 0)
check raw-server-first-no-client-bytes "$d"
check plain-no-header "$(raw 10.96.0.114 none 100000)"
r=$(client http http://10.96.0.100:8080/ --count 40 --timeout 2 --max-time 20)
check plain-service-unchanged "$(judge "$r" 'r["failed"] == 0 and r["ok"] == 40')"

# ---- IPv6: PROXY TCP6 / AF_INET6 headers ------------------------------------------
check v6-v1-transfer "$(download '[fd00:96::110]')$(upload '[fd00:96::110]')"
check v6-v2-transfer "$(download '[fd00:96::111]')$(upload '[fd00:96::111]')"
addresses6() {  # log key: every "KEY=" line names the client fd00:10::2
  local f=$1 k=$2 n bad
  n=$(grep -ac "$k=" "$f" 2>/dev/null)
  bad=$(tr -d '\0' <"$f" | grep -a "$k=" | grep -v "$k=fd00:10::2:[0-9]" | head -n 2)
  if [ "${n:-0}" -lt 2 ]; then echo "$n request(s) logged, want >= 2: $(tail -n 3 "$f" | tr -d '\0' | tr '\n' ' ')"
  elif [ -n "$bad" ]; then echo "logged a client other than fd00:10::2: $bad"; fi
}
note "nginx (IPv6): $(head -n 1 "$TMP/nginx/access6.log")"
note "haproxy (IPv6): $(grep -a 'client6=' "$TMP/haproxy.log" | tr -d '\0' | head -n 1)"
d=$(addresses6 "$TMP/nginx/access6.log" client)
[ -z "$d" ] && grep -aq 'remote=fd00:10::2 ' "$TMP/nginx/access6.log" && d="the TCP peer itself was the client: no full NAT?"
check v6-v1-client-address "$d"
check v6-v2-client-address "$(addresses6 "$TMP/haproxy.log" client6)"
check v6-raw-v1-header-once "$(raw '[fd00:96::112]' v1 1000000)"
check v6-raw-v2-header-once "$(raw '[fd00:96::113]' v2 1000000)"

# ---- packet loss on the pods' links ------------------------------------------------
loss_on() {
  local n
  for n in 1 2 3; do
    inpod "$n" iptables -A INPUT -i eth0 -m statistic --mode random --probability 0.02 -j DROP &&
      inpod "$n" iptables -A OUTPUT -o eth0 -m statistic --mode random --probability 0.02 -j DROP || return 1
  done
}
drops() {  # packets the loss rules dropped in pod N
  inpod "$1" iptables -nvxL INPUT 2>/dev/null | awk '/statistic/ {s += $1} END {print s + 0}'
}
if loss_on 2>"$TMP/iptables.err"; then
  d="$(download 10.96.0.110)$(upload 10.96.0.110)"
  [ -z "$d" ] && [ "$(drops 1)" -eq 0 ] && d="the loss rule in pod1 dropped nothing: the check tested nothing"
  check loss-v1-transfer "$d"
  check loss-v2-transfer "$(download 10.96.0.111)$(upload 10.96.0.111)"
  d=$(raw 10.96.0.112 v1 2000000)
  [ -z "$d" ] && d=$(raw 10.96.0.113 v2 2000000)
  check loss-header-once "$d"
  note "loss rules dropped $(drops 1) / $(drops 2) / $(drops 3) inbound packets in pod1 / pod2 / pod3"
  for n in 1 2 3; do inpod "$n" iptables -F INPUT; inpod "$n" iptables -F OUTPUT; done
else
  for c in loss-v1-transfer loss-v2-transfer loss-header-once; do
    skip "$c" "iptables statistic match not usable in a namespace: $(head -c 200 "$TMP/iptables.err")"
  done
fi

# ---- reordering on the pods' links (scripts/lab/reorder_relay.py) ------------------
# This host has no netem qdisc, so a relay reorders: in the switch namespace pod1..3's
# veths leave the bridge, a new veth pair rlyN <-> rlyNb takes each one's place in it,
# and the relay forwards frames podN <-> rlyNb, holding back every 7th frame of each
# direction until the next one has passed (reordered, never lost).
SW="${P}sw"
reorder_on() {
  local n
  for n in 1 2 3; do
    ip -n "$SW" link set dev "pod$n" nomaster &&
      ip -n "$SW" link add name "rly$n" type veth peer name "rly${n}b" &&
      ip -n "$SW" link set dev "rly$n" master br0 || return 1
    ip netns exec "$SW" ethtool -K "rly$n" tx off rx off tso off gso off gro off >/dev/null 2>&1
    ip netns exec "$SW" ethtool -K "rly${n}b" tx off rx off tso off gso off gro off >/dev/null 2>&1
    ip -n "$SW" link set dev "rly$n" up && ip -n "$SW" link set dev "rly${n}b" up || return 1
  done
  ip netns exec "$SW" "$PYTHON" scripts/lab/reorder_relay.py --every 7 --max-seconds 240 \
    --link pod1:rly1b --link pod2:rly2b --link pod3:rly3b \
    --stats "$TMP/relay.json" --pidfile "$TMP/relay.pid" </dev/null >"$TMP/relay.log" 2>&1 &
  RELAY_PID=$!
  for _ in $(seq 1 50); do [ -s "$TMP/relay.pid" ] && return 0; kill -0 "$RELAY_PID" 2>/dev/null || break; sleep 0.1; done
  echo "relay did not start: $(tail -n 2 "$TMP/relay.log" | tr '\n' ' ')"
  return 1
}
reorder_off() {  # stops the relay (it writes its counters), puts the pods back on br0
  local n
  [ -n "${RELAY_PID:-}" ] && { kill -TERM "$RELAY_PID" 2>/dev/null; wait "$RELAY_PID" 2>/dev/null; }
  for n in 1 2 3; do
    ip -n "$SW" link del dev "rly$n" 2>/dev/null
    ip -n "$SW" link set dev "pod$n" master br0 2>/dev/null
  done
}
RELAY_PID=
if reorder_on >"$TMP/reorder.err" 2>&1; then
  d1="$(download 10.96.0.110)$(upload 10.96.0.110)"
  d2="$(download 10.96.0.111)$(upload 10.96.0.111)"
  d3=$(raw 10.96.0.112 v1 2000000)
  [ -z "$d3" ] && d3=$(raw 10.96.0.113 v2 2000000)
  reorder_off
  # Every direction of pod1..3's links must have been reordered, else nothing was tested.
  r=$("$PYTHON" - "$TMP/relay.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception as e:
    print("no relay counters: %s" % e); sys.exit()
bad = ["%s %s" % (l, d) for l, ds in s["links"].items() for d, c in ds.items() if c["reordered"] < 1]
summary = ", ".join("%s %d/%d" % (d, c["reordered"], c["frames"]) for ds in s["links"].values() for d, c in ds.items())
print("NOTE " + summary if not bad else "the relay reordered nothing on: " + ", ".join(bad) + " (" + summary + ")")
PY
)
  note "relay reordered/frames: ${r#NOTE }"
  [ "${r#NOTE }" != "$r" ] && r=""
  check reorder-transfer "$d1$d2$r"
  check reorder-header-once "$d3"
else
  reorder_off
  fail reorder-transfer "could not put the relay on the pods' links: $(head -c 300 "$TMP/reorder.err" | tr '\n' ' ')"
  fail reorder-header-once "no relay"
fi

if vipd_alive && status_json >/dev/null; then pass vipd-alive; else fail vipd-alive "vipd is not running or not answering"; fi
