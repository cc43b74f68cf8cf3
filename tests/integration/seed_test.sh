#!/usr/bin/env bash
# usage: tests/integration/seed_test.sh fnat|nat|fnat-2w|nat-huge
# variants: fnat nat fnat-2w nat-huge
#
# The seed scenario as assertions, with vipd in dpdk mode (af_packet vdevs) in a
# private network-namespace lab (scripts/lab.sh, unique LAB_PREFIX), for one
# forward method. Variants: plain (one worker, --no-huge), "-2w" (two worker
# lcores sharing one CPU, so flows cross the redirect rings), "-huge" (EAL on
# 2 MiB hugepages; reserved and mounted privately for the test, released after). Each check prints exactly "PASS: <name>" or
# "FAIL: <name>: <detail>"; other output is indented. Exit status: 0 if all
# passed, 1 if any failed, 2 on usage errors, 77 (with "SKIP: ..." lines) when
# the test cannot run here (not root, no network namespaces).
# The plain fnat and nat variants also run the scenario over IPv6 in the same lab
# (LAB_IPV6=1; SEED_IPV6=0 turns that off): the v6- checks (spread over the four
# pods, pod4 removed with 0 failed requests, change-to-dataplane, REJECT over TCP
# and UDP as ICMPv6 port unreachable, UDP round trip, and requests from the
# off-link client ${P}far behind the router ${P}client spread over the pods:
# vipd's IPv6 gateway is the client's link-local fe80::2 in fnat, its
# fd00:10::2 in nat), and a 300 kB download by far across a 1280-byte link
# (v6-pmtu: the router's ICMPv6 packet too big to the VIP, translated by vipd
# to the pod).
# Env: VIPD_BIN / VIPCTL_BIN (default $VIPD_BUILD_DIR/vipd or .../cmd/vipd, same for
# vipctl; VIPD_BUILD_DIR defaults to build).
set -uo pipefail

VARIANT=${1:-}
case $VARIANT in
  fnat|nat|fnat-2w|nat-2w|fnat-huge|nat-huge) ;;
  *) echo "usage: tests/integration/seed_test.sh fnat|nat|fnat-2w|nat-2w|fnat-huge|nat-huge" >&2; exit 2 ;;
esac
METHOD=${VARIANT%%-*}
EXTRA=${VARIANT#"$METHOD"}
EXTRA=${EXTRA#-}
NAME="seed_test($VARIANT)"

# ---- can we run here? ---------------------------------------------------------
CHECKS=(vipd-starts forward-method http-four-pods-even change-to-dataplane expire-on-removal
        http-after-removal no-endpoints-refused udp-no-endpoints-refused udp-roundtrip ping-vip
        malformed-counted vipctl-list vipctl-stats vipd-alive)
# IPv6 in the same lab (LAB_IPV6=1), plain fnat and nat variants only: db6
# fd00:96::100 (TCP 8080, UDP 9053) over the four pods' IPv6 addresses and
# empty6 fd00:96::101 (no endpoints), forwarded by the dpdk dataplane (ports'
# IPv6 addresses fd00:10::1 / fd00:244::1; fnat: local address fd00:244::ff:1),
# off-link clients through the gateway of port 0 (`--port-ipv6 '... via GW'`).
V6=0
if [ -z "$EXTRA" ] && [ "${SEED_IPV6:-1}" = 1 ]; then
  V6=1
  export LAB_IPV6=1
  CHECKS+=(v6-http-four-pods v6-offlink-client v6-change-to-dataplane v6-removal-no-failures v6-no-endpoints-refused
           v6-udp-no-endpoints-refused v6-udp-roundtrip v6-pmtu)
fi
# IPv6 operator tools (same lab, same variants): vipctl explain names the pod that
# served a held IPv6 connection; the per-backend series of a /metrics scrape
# count the IPv6 requests each pod served.
V6_TOOL_CHECKS=(v6-explain-served-backend v6-metrics-backend-series)
[ "$V6" = 1 ] && CHECKS+=("${V6_TOOL_CHECKS[@]}")
SKIP_HINT="run as root on a kernel with network namespaces, veth and bridge"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
require_vipd

export LAB_PREFIX="vt${METHOD:0:1}${EXTRA:0:1}$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d "/tmp/vipd-seed-$VARIANT.XXXXXX")
HUGE_MNT=
HUGE_OLD=
CONF=config/demo/vipd.conf

cleanup_extra() {
  if [ -n "$HUGE_MNT" ]; then
    stop_pid "$VIPD_PID"   # before the hugetlbfs mount goes
    umount "$HUGE_MNT" 2>/dev/null
    rmdir "$HUGE_MNT" 2>/dev/null
  fi
  [ -n "$HUGE_OLD" ] && echo "$HUGE_OLD" >/proc/sys/vm/nr_hugepages 2>/dev/null
  return 0
}
lib_traps

# ---- lab + vipd -----------------------------------------------------------------
lab_up
mkdir -p "$TMP/manifests" "$TMP/stage"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
if [ "$V6" = 1 ]; then
  if why=$(kernel_v6_manifests); then
    if [ "$METHOD" = nat ]; then
      VARGS_V6=(--port-ipv6 "fd00:10::1/64 via fd00:10::2,fd00:244::1")
    else
      VARGS_V6=(--port-ipv6 "fd00:10::1/64 via fe80::2,fd00:244::1" --fnat-local-addrs6 fd00:244::ff:1)
    fi
  else
    V6=0
    for c in v6-http-four-pods v6-offlink-client v6-change-to-dataplane v6-removal-no-failures v6-no-endpoints-refused \
             v6-udp-no-endpoints-refused v6-udp-roundtrip v6-pmtu; do skip "$c" "$why"; done
    for c in "${V6_TOOL_CHECKS[@]}"; do skip "$c" "$why"; done
  fi
fi
EAL=$(sed -n 's/^[[:space:]]*eal-args[[:space:]]*=[[:space:]]*//p' "$CONF" | tail -n 1)
VARGS=()
[ "$V6" = 1 ] && VARGS+=("${VARGS_V6[@]}")
case $EXTRA in
  2w)
    # Two workers on lcores 1 and 2, both on CPU 1 (this machine may have two CPUs).
    EAL="$EAL --lcores 0@0,1@1,2@1"
    VARGS+=(--worker-lcores 1,2) ;;
  huge)
    # 160 x 2 MiB pages on top of what is reserved, on a private hugetlbfs mount.
    HUGE_OLD=$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo)
    want=$(( ${HUGE_OLD:-0} + 160 ))
    echo "$want" >/proc/sys/vm/nr_hugepages 2>/dev/null
    free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
    HUGE_MNT=$(mktemp -d /tmp/vipd-huge.XXXXXX)
    if [ "${free:-0}" -lt 150 ] || ! mount -t hugetlbfs -o pagesize=2M nodev "$HUGE_MNT" 2>/dev/null; then
      rmdir "$HUGE_MNT" 2>/dev/null; HUGE_MNT=
      for c in "${CHECKS[@]}"; do echo "SKIP: $c: cannot reserve 2 MiB hugepages here (free: ${free:-0})"; done
      echo "!!! $NAME: all checks SKIPPED: no hugepages could be reserved" >&2
      exit 77
    fi
    note "hugepages: ${free} free, hugetlbfs on $HUGE_MNT"
    EAL="-m 256 --huge-dir $HUGE_MNT --huge-unlink" ;;
esac
ip netns exec "${P}lb" "$VIPD" --config "$CONF" --forward-method "$METHOD" \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  "--eal-args=$EAL --file-prefix ${P}vipd" "${VARGS[@]}" \
  </dev/null >"$TMP/vipd.log" 2>&1 &
VIPD_PID=$!

gen=
st=
t0=$(date +%s%N)
for _ in $(seq 1 300); do   # ~30 s
  vipd_alive || break
  if st=$(status_json); then
    gen=$(generation_of "$st")
    [ -n "$gen" ] && [ "$gen" -ge 1 ] && break
  fi
  gen=
  sleep 0.1
done
if [ -n "$gen" ]; then
  pass vipd-starts
  note "generation $gen after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
elif ! vipd_alive; then
  wait "$VIPD_PID"; rc=$?; VIPD_PID=
  fail vipd-starts "vipd exited during start-up (exit status $rc): $(tail -n 1 "$TMP/vipd.log")"
  exit 1
else
  fail vipd-starts "no generation >= 1 in 'vipctl status --json' within 30 s (last: ${st:-no answer})"
  exit 1
fi

mode=$(json_field "$st" mode)
fm=$(json_field "$st" forward_method)
if [ "$mode" = dpdk ] && [ "$fm" = "$METHOD" ]; then pass forward-method
else fail forward-method "status says mode '$mode', forward_method '$fm'; expected dpdk, $METHOD"; fi

# ---- 400 requests over 4 pods ------------------------------------------------------
r=$(client http http://10.96.0.100:8080/ --count 400 --timeout 2 --max-time 40)
note "4 pods: $r"
d=$(judge "$r" 'r["failed"] == 0 and all(70 <= n("pod%d" % i) <= 130 for i in range(1, 5))')
if [ -z "$d" ] && [ -n "$r" ]; then pass http-four-pods-even; else fail http-four-pods-even "want 0 failed and each pod 70..130: ${d:-no result}"; fi

# ---- IPv6: the seed scenario over the dpdk dataplane (before pod4 goes) ------------
if [ "$V6" = 1 ]; then
  r=$(client http "http://[fd00:96::100]:8080/" --count 400 --timeout 2 --max-time 40)
  note "IPv6, 4 pods: $r"
  d=$(judge "$r" 'r["failed"] == 0 and all(70 <= n("pod%d" % i) <= 130 for i in range(1, 5))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-http-four-pods; else fail v6-http-four-pods "want 0 failed and each pod 70..130: ${d:-no result}"; fi
  # From the off-link client: vipd sends the replies to its IPv6 gateway.
  r=$(ip netns exec "${P}far" "$PYTHON" scripts/lab/client.py http "http://[fd00:96::100]:8080/" \
        --count 100 --timeout 2 --max-time 20)
  note "IPv6, off-link client fd00:20::2: $r"
  d=$(judge "$r" 'r["failed"] == 0 and all(n("pod%d" % i) >= 10 for i in range(1, 5))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-offlink-client
  else fail v6-offlink-client "want 0 failed and each pod >= 10 of 100 from fd00:20::2 (vipd's gateway: ${VARGS_V6[1]}): ${d:-no result}"; fi
  # Path MTU: the router's link to far gets MTU 1280 while far advertises an
  # MSS for 1500, so the pods' full-size segments make the router send ICMPv6
  # packet too big to the VIP; vipd must translate it to the pod (IPv6
  # routers never fragment: without it the download stalls).
  snmp6() { ip netns exec "$1" awk -v k="$2" '$1 == k {v = $2} END {print v + 0}' /proc/net/snmp6; }
  ip -n "${P}client" link set dev far0 mtu 1280
  ptb_out0=$(snmp6 "${P}client" Icmp6OutPktTooBigs)
  ptb_in0=0
  for n in 1 2 3 4; do ptb_in0=$(( ptb_in0 + $(snmp6 "${P}pod$n" Icmp6InPktTooBigs) )); done
  got=$(ip netns exec "${P}far" "$PYTHON" -c 'import sys, urllib.request
print(len(urllib.request.urlopen(sys.argv[1], timeout=5).read()))' "http://[fd00:96::100]:8080/bytes/300000" 2>&1 | tail -n 1)
  ptb_out=$(( $(snmp6 "${P}client" Icmp6OutPktTooBigs) - ptb_out0 ))
  ptb_in=$(( -ptb_in0 ))
  for n in 1 2 3 4; do ptb_in=$(( ptb_in + $(snmp6 "${P}pod$n" Icmp6InPktTooBigs) )); done
  ip -n "${P}client" link set dev far0 mtu 1500
  note "IPv6 path MTU 1280: got '$got' of 300000 bytes; router sent $ptb_out packet too big, pods received $ptb_in"
  if [ "$got" = 300000 ] && [ "$ptb_out" -ge 1 ] && [ "$ptb_in" -ge 1 ]; then pass v6-pmtu
  else fail v6-pmtu "want 300000 bytes through the 1280 link, >= 1 packet too big sent by the router and >= 1 received by a pod (translated by vipd): got '$got', sent $ptb_out, received $ptb_in"; fi

  gen_before=$(generation)
  kernel_write_slice6 "$TMP/slice6.new" "${KERNEL_POD6[@]:0:3}"
  replace_file "$TMP/manifests/endpointslice-db6.yaml" "$TMP/slice6.new"
  wait_generation $(( ${gen_before:-0} + 1 )) 100
  st=$(status_json)
  ms=$(json_field "$st" last_change_to_applied_ms)
  note "IPv6 change-to-dataplane: vipd reports ${ms:-?} ms; generation ${gen_before:-?} -> $(generation_of "$st")"
  if [ -n "$ms" ] && [ "$(generation_of "$st")" -gt "${gen_before:-0}" ] &&
     "$PYTHON" -c 'import sys; sys.exit(0 if 0 <= float(sys.argv[1]) < 100 else 1)' "$ms" 2>/dev/null; then
    pass v6-change-to-dataplane
  else
    fail v6-change-to-dataplane "generation ${gen_before:-?} -> $(generation_of "$st"), last_change_to_applied_ms '${ms}' (want a new generation, below 100 ms)"
  fi
  r=$(client http "http://[fd00:96::100]:8080/" --count 300 --timeout 2 --max-time 40)
  note "IPv6, pod4 removed: $r"
  d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-removal-no-failures; else fail v6-removal-no-failures "want 0 failed, none to pod4, pod1..pod3 > 0: ${d:-no result}"; fi

  out=$(client connect "[fd00:96::101]:80" --timeout 2)
  if [ "$out" = refused ]; then pass v6-no-endpoints-refused; else fail v6-no-endpoints-refused "connect [fd00:96::101]:80 gave '$out', want 'refused' (ICMPv6 port unreachable)"; fi
  r=$(client udp "[fd00:96::101]:53" --count 3 --timeout 1 --max-time 10)
  d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-udp-no-endpoints-refused; else fail v6-udp-no-endpoints-refused "want 3 x ConnectionRefusedError: ${d:-no result}"; fi
  r=$(client udp "[fd00:96::100]:9053" --count 100 --timeout 1 --max-time 30)
  note "IPv6 udp: $r"
  d=$(judge "$r" 'r["ok"] >= 95 and set(pods) <= {"pod1", "pod2", "pod3"} and len(pods) >= 2')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-udp-roundtrip; else fail v6-udp-roundtrip "want >= 95 of 100 replies from >= 2 of pod1..pod3: ${d:-no result}"; fi
fi

# ---- IPv6: vipctl explain and the per-backend metric series (pod1..pod3) ---------
if [ "$V6" = 1 ]; then
  # One connection held open after its answer: explain must name the pod that
  # answered it, by its IPv6 address in RFC 5952 form.
  declare -A POD6=([pod1]=fd00:244::1:15 [pod2]=fd00:244::2:88 [pod3]=fd00:244::3:12 [pod4]=fd00:244::3:44)
  ip netns exec "${P}client" "$PYTHON" - "$TMP/explain6.go" >"$TMP/explain6.out" 2>&1 <<'PY' &
import os, socket, sys, time
s = socket.create_connection(("fd00:96::100", 8080), timeout=2)
s.sendall(b"GET / HTTP/1.1\r\nHost: vip\r\n\r\n")
data = b""
while b"\r\n\r\n" not in data or b"\n" not in data.split(b"\r\n\r\n", 1)[1]:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
pod = data.split(b"\r\n\r\n", 1)[-1].split(b"\n", 1)[0].strip().decode(errors="replace")
print("%s %d %s" % (s.getsockname()[0], s.getsockname()[1], pod), flush=True)
end = time.monotonic() + 10
while not os.path.exists(sys.argv[1]) and time.monotonic() < end:
    time.sleep(0.02)
s.close()
PY
  held=$!
  for _ in $(seq 1 100); do [ -s "$TMP/explain6.out" ] && break; sleep 0.05; done
  read -r caddr cport cpod <"$TMP/explain6.out"
  ex=$(vipctl explain tcp "[$caddr]:${cport:-0}" "[fd00:96::100]:8080" --json 2>&1)
  touch "$TMP/explain6.go"
  wait "$held"
  # (The pod may have closed its side already: the entry is then closing and the
  # decision for a new SYN is "schedule"; the connection's backend is what counts.)
  eb=$("$PYTHON" -c 'import json,sys; j=json.load(sys.stdin); c=j["connection"]; print(j["query"]["dst"], c["backend"], c["state"], j["decision"])' <<<"$ex" 2>/dev/null)
  note "IPv6 held connection from [$caddr]:$cport answered by ${cpod:-?}; explain: ${eb:-$(head -c 300 <<<"$ex")}"
  eb=${eb% * *}
  want="[fd00:96::100]:8080 [${POD6[${cpod:-none}]:-none}]:8080"
  if [ -n "$cpod" ] && [ "$eb" = "$want" ]; then pass v6-explain-served-backend
  else fail v6-explain-served-backend "want '$want', got '${eb:-$(head -c 300 <<<"$ex" | tr '\n' ' ')}'"; fi

  # A Prometheus text scrape before and after 30 IPv6 requests: each pod's
  # vipd_backend_connections_total grows by what it served, packets both ways.
  scrape6() {
    ip netns exec "${P}lb" "$PYTHON" -c '
import re, sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:10249/metrics", timeout=5).read().decode()
for line in text.splitlines():
    m = re.match(r"(vipd_backend_(?:connections|packets)_total)\{(.*)\} (\S+)$", line)
    if m and "vip=\"[fd00:96::100]:8080\"" in m.group(2):
        b = re.search(r"backend=\"([^\"]*)\"", m.group(2)).group(1)
        d = re.search(r"direction=\"([^\"]*)\"", m.group(2))
        print(m.group(1), b, d.group(1) if d else "-", m.group(3))' 2>&1
  }
  before=$(scrape6)
  r=$(client http "http://[fd00:96::100]:8080/" --count 30 --timeout 2 --max-time 20)
  after=$(scrape6)
  d=$("$PYTHON" - "$r" "$before" "$after" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
pods = {"pod1": "[fd00:244::1:15]:8080", "pod2": "[fd00:244::2:88]:8080", "pod3": "[fd00:244::3:12]:8080"}
def parse(t):
    return {(a[0], a[1], a[2]): float(a[3]) for a in (l.split() for l in t.splitlines()) if len(a) == 4}
b, a = parse(sys.argv[2]), parse(sys.argv[3])
grow = lambda k: a.get(k, 0) - b.get(k, 0)
bad = []
if r.get("failed") or not a:
    bad.append("requests %s, %d series after" % (r, len(a)))
for pod, be in pods.items():
    n = r.get("by_pod", {}).get(pod, 0)
    c = grow(("vipd_backend_connections_total", be, "-"))
    pin, pout = grow(("vipd_backend_packets_total", be, "in")), grow(("vipd_backend_packets_total", be, "out"))
    print("    %s %s: served %d, connections +%d, packets in +%d out +%d" % (pod, be, n, c, pin, pout), file=sys.stderr)
    if c != n or (n and (pin < 3 * n or pout < 2 * n)):
        bad.append("%s served %d: connections +%d, packets in +%d out +%d" % (be, n, c, pin, pout))
print("; ".join(bad))
PY
)
  note "IPv6 metrics: $r"
  if [ -z "$d" ] && [ -n "$after" ]; then pass v6-metrics-backend-series
  else fail v6-metrics-backend-series "${d:-no scrape}"; fi
fi

# ---- remove pod4 -----------------------------------------------------------------
# Eight idle connections opened before the change: those pinned to pod4 must get a
# RST from vipd at their next packet (expire_nodest_conn), the others must work.
client hold 10.96.0.100:8080 --conns 8 --go "$TMP/go" --timeout 2 --max-time 60 >"$TMP/hold.out" 2>&1 &
HOLD_PID=$!
for _ in $(seq 1 100); do grep -q '^open' "$TMP/hold.out" 2>/dev/null && break; sleep 0.05; done
gen_before=$(generation_of "$(status_json)")
# slice_without renames a rewritten copy over the file: vipd dates the change by
# the file's mtime, and the outside measurement starts at the rename; the two are
# microseconds apart.
if ! t_mv=$(slice_without "$TMP/manifests/endpointslice-db.yaml" 10.244.3.44); then
  t_mv=${EPOCHREALTIME/./}
  note "warning: could not rewrite the EndpointSlice copy"
fi
gen_after=
t_poll=$t_mv
for _ in $(seq 1 5000); do   # bounded: 10 s
  t_poll=${EPOCHREALTIME/./}
  st=$(status_json) && g=$(generation_of "$st") && [ -n "$g" ] && [ -n "$gen_before" ] &&
    [ "$g" -gt "$gen_before" ] && { gen_after=$g; break; }
  [ $(( ${EPOCHREALTIME/./} - t_mv )) -ge 10000000 ] && break
  sleep 0.002
done
t_seen=${EPOCHREALTIME/./}
outside_us=$(( t_seen - t_mv ))
if [ -z "$gen_after" ]; then
  fail change-to-dataplane "generation did not advance past '${gen_before:-?}' within 10 s of the manifest change"
else
  ms=$(json_field "$st" last_change_to_applied_ms)
  ms=$(printf '%.3f' "$ms" 2>/dev/null || echo "$ms")
  note "change-to-dataplane: vipd reports ${ms:-?} ms; outside (mv -> new generation visible) $((outside_us / 1000)).$(printf '%03d' $((outside_us % 1000))) ms (last vipctl poll took $(( (t_seen - t_poll) / 1000 )) ms); generation $gen_before -> $gen_after"
  if [ -n "$ms" ] && "$PYTHON" -c 'import sys; sys.exit(0 if 0 <= float(sys.argv[1]) < 100 else 1)' "$ms" 2>/dev/null; then
    pass change-to-dataplane
  else
    fail change-to-dataplane "last_change_to_applied_ms '${ms}' is not a number below 100"
  fi
fi
# pod4's server still runs: a RST can only come from vipd.
touch "$TMP/go"
wait "$HOLD_PID" 2>/dev/null
r=$(tail -n 1 "$TMP/hold.out")
note "held connections after removal: $r"
d=$(judge "$r" 'r["failed"] == 0 and r["reset"] >= 1 and r["ok"] + r["reset"] == 8 and n("pod4") == 0')
if [ -z "$d" ] && [ -n "$r" ]; then pass expire-on-removal; else fail expire-on-removal "want 8 answered or reset, >= 1 reset, none from pod4: ${d:-no result}"; fi
scripts/lab.sh kill-pod 4 >/dev/null 2>&1 || note "warning: kill-pod 4 failed"

r=$(client http http://10.96.0.100:8080/ --count 400 --timeout 2 --max-time 40)
note "pod4 removed: $r"
d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
if [ -z "$d" ] && [ -n "$r" ]; then pass http-after-removal; else fail http-after-removal "want 0 failed, none to pod4, pod1..pod3 > 0: ${d:-no result}"; fi

# ---- no endpoints -> RST ----------------------------------------------------------
out=$(client connect 10.96.0.101:80 --timeout 2)
if [ "$out" = refused ]; then pass no-endpoints-refused; else fail no-endpoints-refused "connect 10.96.0.101:80 gave '$out', want 'refused'"; fi

r=$(client udp 10.96.0.101:53 --count 3 --timeout 1 --max-time 10)
note "udp to a service without endpoints: $r"
d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
if [ -z "$d" ] && [ -n "$r" ]; then pass udp-no-endpoints-refused; else fail udp-no-endpoints-refused "want 3 x ConnectionRefusedError (ICMP port unreachable): ${d:-no result}"; fi

# ---- UDP ------------------------------------------------------------------------
r=$(client udp 10.96.0.100:9053 --count 100 --timeout 1 --max-time 30)
note "udp: $r"
d=$(judge "$r" 'r["ok"] >= 95 and set(pods) <= {"pod1", "pod2", "pod3"}')
if [ -z "$d" ] && [ -n "$r" ]; then pass udp-roundtrip; else fail udp-roundtrip "want >= 95 of 100 replies, only from pod1..pod3: ${d:-no result}"; fi

# ---- ICMP echo to the VIP ---------------------------------------------------------
r=$(ip netns exec "${P}client" "$PYTHON" scripts/lab/client.py ping 10.96.0.100 --count 3 --timeout 1)
if [ "$(json_field "$r" received)" = 3 ]; then pass ping-vip; else fail ping-vip "3 echo requests to 10.96.0.100: ${r:-no result}"; fi

# ---- malformed and unsupported frames: dropped, counted, nothing breaks ------------
drops_json() { vipctl stats --json 2>/dev/null; }
before=$(drops_json)
mac=$(ip -n "${P}lb" -o link show c0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
sent=$(ip netns exec "${P}client" "$PYTHON" scripts/lab/badframes.py eth0 "$mac" 10.0.0.2 10.96.0.100 8080 2>&1)
sleep 0.3
after=$(drops_json)
d=$("$PYTHON" - "$before" "$after" "$sent" <<'PY'
import collections, json, sys
def reasons(doc):
    tot = collections.Counter()
    for w in json.loads(doc)["workers"]:
        tot.update(w["drop_reasons"])
    return tot
try:
    b, a = reasons(sys.argv[1]), reasons(sys.argv[2])
except Exception as e:
    print("no stats: %s" % e); sys.exit()
want = collections.Counter(l.split()[0] for l in sys.argv[3].splitlines()
                           if l.strip() and not l.split()[0].endswith("?"))
bad = ["%s +%d (want +%d)" % (r, a[r] - b[r], n) for r, n in want.items() if a[r] - b[r] < n]
print("; ".join(bad) if bad or not want else "")
PY
)
note "sent: $(tr '\n' ' ' <<<"$sent")"
if [ -z "$d" ]; then pass malformed-counted; else fail malformed-counted "$d"; fi
r=$(client http http://10.96.0.100:8080/ --count 40 --timeout 2 --max-time 20)
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 40')
[ -z "$d" ] || fail malformed-counted "forwarding after the malformed frames: $r"

# ---- vipctl ---------------------------------------------------------------------
if out=$(vipctl list 2>&1) && grep -q '10\.96\.0\.100' <<<"$out"; then
  pass vipctl-list
else
  fail vipctl-list "exit/output not as expected: $(head -c 300 <<<"$out" | tr '\n' ' ')"
fi
# rx > 0 in `vipctl stats` (a table, or key: value lines), else in `stats --json`.
rx_positive() {
  "$PYTHON" -c '
import json, re, sys
text = sys.stdin.read()
def walk(v, key=""):
    if isinstance(v, dict):
        return any(walk(x, k) for k, x in v.items())
    if isinstance(v, list):
        return any(walk(x, key) for x in v)
    return bool(re.match(r"(?i)rx", str(key))) and isinstance(v, (int, float)) and v > 0
try:
    sys.exit(0 if walk(json.loads(text)) else 1)
except ValueError:
    pass
num = lambda s: re.fullmatch(r"\d[\d,]*", s) and int(s.replace(",", "")) or 0
lines = [l.split() for l in text.splitlines()]
for i, toks in enumerate(lines):
    cols = [j for j, t in enumerate(toks) if re.match(r"(?i)rx", t)]
    for j in cols:  # header line: look down the column
        for row in lines[i + 1:]:
            if j < len(row) and num(row[j]) > 0:
                sys.exit(0)
        # "rx_packets: 12" / "rx 12" on the same line
        if j + 1 < len(toks) and num(toks[j + 1]) > 0:
            sys.exit(0)
for m in re.finditer(r"(?i)\brx[\w-]*\s*[:=]\s*(\d[\d,]*)", text):
    if int(m.group(1).replace(",", "")) > 0:
        sys.exit(0)
sys.exit(1)'
}
if out=$(vipctl stats 2>&1); then
  if rx_positive <<<"$out" || { js=$(vipctl stats --json 2>/dev/null) && rx_positive <<<"$js"; }; then
    pass vipctl-stats
  else
    fail vipctl-stats "no rx counter > 0 in: $(head -c 300 <<<"$out" | tr '\n' ' ')"
  fi
else
  fail vipctl-stats "vipctl stats failed: $(head -c 200 <<<"$out" | tr '\n' ' ')"
fi

# ---- still alive ------------------------------------------------------------------
if vipd_alive && status_json >/dev/null; then
  pass vipd-alive
else
  fail vipd-alive "vipd is not running or not answering at the end of the test"
fi
