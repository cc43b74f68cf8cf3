# Guest side of tests/integration/ipvs_test.sh (sourced there with --guest; not a
# test of its own). Runs inside scripts/kernel-vm.sh's guest, in the host's
# root over 9p: builds the lab, runs vipd --mode ipvs in ${P}lb and checks the
# kernel's IPVS state and the traffic. Results go to $VM_SHARE/results, one
# "PASS: name" / "FAIL: name: detail" line per check, printed by the host.
# shellcheck shell=bash

P=ipvs-
R=${VM_SHARE:?}/results
G=/run/vipd-ipvs       # the guest's own tmpfs
VIPD=${VIPD_BIN:?}
VIPCTL=${VIPCTL_BIN:?}
VIPD_PID=
BG_PIDS=()
PODS_ALL=(10.244.1.15 10.244.2.88 10.244.3.12 10.244.3.44)
POD6_ALL=(fd00:244::1:15 fd00:244::2:88 fd00:244::3:12 fd00:244::3:44)

pass() { echo "PASS: $1" | tee -a "$R"; }
fail() { echo "FAIL: $1: $2" | tee -a "$R"; }
note() { echo "    $*"; }
inlb() { ip netns exec "${P}lb" "$@"; }
vipctl() { "$VIPCTL" --socket "$G/admin.sock" "$@"; }
status_json() { vipctl status --json 2>/dev/null; }
generation_of() { [[ $1 =~ \"generation\"[[:space:]]*:[[:space:]]*([0-9]+) ]] && echo "${BASH_REMATCH[1]}"; }
jget() { "$PYTHON" -c 'import json,sys
v = json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)' "$1" "$2" 2>/dev/null; }
vipd_alive() { [ -n "$VIPD_PID" ] && kill -0 "$VIPD_PID" 2>/dev/null; }
client() { ip netns exec "${P}client" "$PYTHON" scripts/lab/client.py "$@"; }
judge() {
  "$PYTHON" - "$1" "$2" <<'PY'
import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    print("not a result: %r" % sys.argv[1][:200]); sys.exit()
pods = r.get("by_pod", {})
n = lambda p: pods.get(p, 0)
print("" if eval(sys.argv[2]) else sys.argv[1])
PY
}

# hold HOST PORT N GOFILE: N TCP connections, each with a GET whose headers are
# kept open (one more header line every 2 s, so the pod's 10 s idle timeout
# never fires) until GOFILE exists (<= 90 s); then the requests are finished.
# Prints "open N", then one JSON line {"ok","failed","by_pod","errors"}.
hold() {
  ip netns exec "${P}client" "$PYTHON" - "$@" <<'PY'
import json, os, socket, sys, time
host, port, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
conns, errors = [], {}
def err(e):
    errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
for _ in range(n):
    try:
        c = socket.create_connection((host, port), timeout=5)
        c.sendall(b"GET / HTTP/1.1\r\nHost: vip\r\n")
        conns.append(c)
    except OSError as e:
        err(e)
print("open %d" % len(conns), flush=True)
deadline = time.time() + 90
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(2)
    for c in conns:
        try:
            c.sendall(b"X-Keep: 1\r\n")
        except OSError:
            pass
ok, by_pod = 0, {}
for c in conns:
    try:
        c.sendall(b"\r\n")
        data = b""
        while True:
            b = c.recv(4096)
            if not b:
                break
            data += b
        body = data.split(b"\r\n\r\n", 1)[1].decode().strip() if b" 200 " in data.split(b"\r\n", 1)[0] else ""
        if not body:
            raise ValueError("bad response %r" % data[:80])
        ok += 1
        by_pod[body] = by_pod.get(body, 0) + 1
    except (OSError, ValueError, IndexError) as e:
        err(e)
    finally:
        c.close()
print(json.dumps({"ok": ok, "failed": n - ok, "by_pod": by_pod, "errors": errors}), flush=True)
PY
}

write_slice() {  # SERVICE FILE POD_IP...
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
write_slice6() {  # FILE POD_IP6...: db6's EndpointSlice (addressType IPv6)
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
write_service6() {  # NAME IP PORTS FILE: an IPv6 single-stack ClusterIP Service
  printf '%s\n' "apiVersion: v1" "kind: Service" "metadata: {name: $1, namespace: default}" "spec:" \
    "  type: ClusterIP" "  clusterIP: $2" "  clusterIPs: [$2]" "  ipFamilies: [IPv6]" \
    "  ipFamilyPolicy: SingleStack" "  ports: [$3]" >"$4"
}
# Replaces a manifest in one rename(2), so vipd's inotify sees a complete file.
install_manifest() { cp "$1" "$G/stage/$(basename "$2")" && mv -f "$G/stage/$(basename "$2")" "$2"; }

start_vipd() {
  # ip netns exec execs vipd: $! is vipd itself (a shell function here would
  # put a subshell in between, and a TERM to it would leave vipd running).
  ip netns exec "${P}lb" "$VIPD" --mode ipvs --manifests-dir "$G/manifests" --admin-socket "$G/admin.sock" \
    --metrics-address 127.0.0.1:10249 --health-address 127.0.0.1:10256 </dev/null >>"$G/vipd.log" 2>&1 &
  VIPD_PID=$!
}
stop_vipd() {
  local rc=0
  if vipd_alive; then
    kill -TERM "$VIPD_PID"
    for _ in $(seq 1 100); do vipd_alive || break; sleep 0.1; done
    vipd_alive && kill -KILL "$VIPD_PID"
    wait "$VIPD_PID"; rc=$?
  fi
  VIPD_PID=
  return "$rc"
}
# Waits (<= 60 s) for a successful sync with generation > $1; prints the status.
wait_gen_above() {
  local st g
  for _ in $(seq 1 300); do
    vipd_alive || return 1
    if st=$(status_json) && g=$(generation_of "$st") && [ -n "$g" ] && [ "$g" -gt "$1" ] &&
       [ -z "$(jget "$st" last_error)" ]; then
      echo "$st"; return 0
    fi
    sleep 0.2
  done
  return 1
}
ipvsadm_now() { inlb ipvsadm -Ln >"$G/ipvsadm.txt" 2>&1; cat "$G/ipvsadm.txt"; }
# Differences between the kernel and what vipd --dry-run wants (empty: none).
ipvs_diff() {
  "$VIPD" --mode ipvs --dry-run --manifests-dir "$G/manifests" >"$G/want.txt" 2>"$G/want.err" ||
    { echo "dry-run failed: $(head -c 200 "$G/want.err")"; return; }
  inlb ipvsadm -Ln >"$G/have.txt" 2>&1
  "$PYTHON" tests/integration/ipvs_state.py compare "$G/want.txt" "$G/have.txt" "$@" | tr '\n' ';'
}
dest_info() {  # SERVICE DEST -> "WEIGHT ACTIVECONN INACTCONN" from ipvsadm -Ln ("" when absent)
  inlb ipvsadm -Ln >"$G/cur.txt" 2>&1
  awk -v s="$1" -v d="$2" '$1 == "TCP" || $1 == "UDP" { cur = $1 " " $2 }
    cur == s && $1 == "->" && $2 == d { print $4, $5, $6 }' "$G/cur.txt"
}

guest_cleanup() {
  local p
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  stop_vipd >/dev/null 2>&1
  if grep -q '^FAIL' "$R" 2>/dev/null && [ -s "$G/vipd.log" ]; then
    note "---- last lines of the vipd log ----"
    tail -n 40 "$G/vipd.log" | sed 's/^/    | /'
    note "---- ipvsadm -Ln ----"
    inlb ipvsadm -Ln 2>&1 | sed 's/^/    | /'
  fi
  scripts/lab.sh down >/dev/null 2>&1
}

guest_main() {
  local t0 st gen out r d
  t0=$(date +%s)
  # LAB_IPV6=1: client fd00:10::2, pods fd00:244::x (podserver on [::] too);
  # ${P}lb gets fd00:10::1 / fd00:244::1 below (vipd sets IPv6 forwarding itself).
  export LAB_PREFIX=$P PYTHON LAB_IPV6=1
  : >"$R"
  mkdir -p "$G/manifests" "$G/stage"
  trap guest_cleanup EXIT
  if ! scripts/lab.sh up >"$G/lab.log" 2>&1; then
    fail vipd-starts "scripts/lab.sh up failed in the guest: $(tail -n 5 "$G/lab.log" | tr '\n' ' ')"
    return 1
  fi
  ip -n "${P}lb" addr add 10.0.0.1/24 dev c0 && ip -n "${P}lb" addr add 10.244.0.1/16 dev p0 ||
    { fail vipd-starts "cannot address ${P}lb"; return 1; }
  inlb sysctl -qw net.ipv6.conf.all.disable_ipv6=0 net.ipv6.conf.default.disable_ipv6=0 \
    net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
    net.ipv6.conf.c0.disable_ipv6=0 net.ipv6.conf.p0.disable_ipv6=0 net.ipv6.conf.all.forwarding=0 >/dev/null &&
    ip -n "${P}lb" addr add fd00:10::1/64 dev c0 nodad && ip -n "${P}lb" addr add fd00:244::1/64 dev p0 nodad ||
    { fail vipd-starts "cannot give ${P}lb its IPv6 addresses"; return 1; }
  note "lab up $(( $(date +%s) - t0 )) s after the guest command started"
  cp config/demo/manifests/service.yaml "$G/manifests/"
  write_slice db "$G/manifests/endpointslice-db.yaml" "${PODS_ALL[@]}"
  cat >"$G/manifests/sticky.yaml" <<'EOF'
apiVersion: v1
kind: Service
metadata: {name: sticky, namespace: default}
spec:
  clusterIP: 10.96.0.102
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 300}}
  ports: [{name: http, port: 8080, protocol: TCP}]
EOF
  write_slice sticky "$G/manifests/sticky-slice.yaml" "${PODS_ALL[@]}"
  # IPv6 (the lab's LAB_IPV6 addresses): db6 in front of the four pods, empty6 without endpoints.
  write_service6 db6 fd00:96::100 "{name: http, port: 8080, protocol: TCP}, {name: dns, port: 9053, protocol: UDP}" \
    "$G/manifests/service6.yaml"
  write_service6 empty6 fd00:96::101 "{name: http, port: 80, protocol: TCP}, {name: dns, port: 53, protocol: UDP}" \
    "$G/manifests/empty6.yaml"
  write_slice6 "$G/manifests/endpointslice-db6.yaml" "${POD6_ALL[@]}"

  # ---- start ---------------------------------------------------------------------
  start_vipd
  if st=$(wait_gen_above 0) && [ "$(jget "$st" mode)" = ipvs ] && [ "$(jget "$st" ipvs.services)" = 9 ] &&
     [ "$(jget "$st" ipvs.ipv6_services)" = 4 ]; then
    pass vipd-starts
  else
    fail vipd-starts "no successful sync in mode ipvs with 9 services (4 IPv6): $(status_json | head -c 300) $(tail -n 3 "$G/vipd.log" | tr '\n' ' ')"
    return 1
  fi
  gen=$(generation_of "$st")
  out=$(for s in net/ipv4/ip_forward net/ipv4/vs/conntrack net/ipv4/vs/expire_nodest_conn net/ipv4/vs/expire_quiescent_template; do
    printf '%s=%s ' "$s" "$(inlb cat "/proc/sys/$s" 2>&1)"; done)
  if [ "$(grep -o '=1 ' <<<"$out" | wc -l)" -eq 4 ] && [ "$(jget "$st" ipvs.sysctl_errors)" = 0 ]; then
    pass sysctls-set
  else
    fail sysctls-set "$out; status ipvs.sysctl_error: $(jget "$st" ipvs.sysctl_error)"
  fi
  ipvsadm_now | sed 's/^/    ipvsadm: /'
  d=$(ipvs_diff)
  if [ -z "$d" ]; then pass ipvsadm-initial; else fail ipvsadm-initial "$d"; fi
  out=$(ip -n "${P}lb" -d -4 addr show dev vipd-ipvs0 2>&1)
  if grep -q 'dummy' <<<"$out" && [ "$(grep -c 'inet 10\.96\.0\.10[012]/32' <<<"$out")" -eq 3 ] &&
     [ "$(grep -c 'inet ' <<<"$out")" -eq 3 ]; then
    pass vips-bound
  else
    fail vips-bound "$(tr '\n' ' ' <<<"$out" | head -c 400)"
  fi
  out=$(inlb iptables-save 2>&1)
  if [ "$(grep -c '^-A POSTROUTING .*-j VIPD-IPVS-POSTROUTING' <<<"$out")" -eq 1 ] &&
     [ "$(grep -c '^-A INPUT .*-j VIPD-IPVS-SERVICES' <<<"$out")" -eq 1 ] &&
     grep -q '^-A VIPD-IPVS-POSTROUTING .*-m ipvs .*-j MASQUERADE' <<<"$out" &&
     grep -q '^-A VIPD-IPVS-SERVICES .*10\.96\.0\.101/32.*--dport 80 .*-j REJECT' <<<"$out"; then
    pass rules-once
  else
    fail rules-once "$(grep VIPD <<<"$out" | tr '\n' '|' | head -c 600)"
  fi

  # ---- traffic ----------------------------------------------------------------------
  r=$(client http http://10.96.0.100:8080/ --count 200 --timeout 3 --max-time 120)
  note "200 requests: $r"
  d=$(judge "$r" 'r["failed"] == 0 and all(40 <= n("pod%d" % i) <= 60 for i in range(1, 5))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass http-four-pods; else fail http-four-pods "want 0 failed, 40..60 per pod (rr): ${d:-no result}"; fi

  client hold 10.96.0.100:8080 --conns 4 --go "$G/go-masq" --timeout 3 --max-time 30 >"$G/hold-masq.out" 2>&1 &
  BG_PIDS+=($!)
  for _ in $(seq 1 100); do grep -q '^open' "$G/hold-masq.out" 2>/dev/null && break; sleep 0.1; done
  out=$(for n in 1 2 3 4; do ip netns exec "${P}pod$n" ss -Htn state established '( sport = :8080 )' 2>/dev/null | awk '{print $NF}'; done | sed 's/:[0-9]*$//' | sort -u | tr '\n' ' ')
  touch "$G/go-masq"
  if [ "$out" = "10.244.0.1 " ]; then pass masquerade; else fail masquerade "pods saw peers '${out:-none}'; want only 10.244.0.1 (fnat)"; fi

  # ---- pod4 leaves the slice while it has open connections ---------------------------------
  hold 10.96.0.100 8080 8 "$G/go-drain" >"$G/hold.out" 2>&1 &
  local hold=$!
  BG_PIDS+=("$hold")
  for _ in $(seq 1 100); do grep -q '^open' "$G/hold.out" 2>/dev/null && break; sleep 0.1; done
  write_slice db "$G/stage.yaml" 10.244.1.15 10.244.2.88 10.244.3.12
  gen=$(generation_of "$(status_json)")
  install_manifest "$G/stage.yaml" "$G/manifests/endpointslice-db.yaml"
  st=$(wait_gen_above "$gen") || st=
  local w a
  read -r w a _ <<<"$(dest_info "TCP 10.96.0.100:8080" 10.244.3.44:8080)"
  note "pod4 after the removal: weight '${w}', ActiveConn '${a}'"
  if [ -n "$st" ] && [ "$w" = 0 ] && [ "${a:-0}" -ge 1 ]; then
    pass drain-weight-zero
  else
    fail drain-weight-zero "want pod4 at weight 0 with ActiveConn >= 1 after the sync (synced: ${st:+yes}); $(tr '\n' '|' <"$G/cur.txt")"
  fi
  touch "$G/go-drain"
  wait "$hold" 2>/dev/null
  r=$(tail -n 1 "$G/hold.out")
  note "held connections: $r"
  d=$(judge "$r" 'r["ok"] == 8 and n("pod4") >= 1')
  if [ -z "$d" ]; then pass drain-open-conns-served; else fail drain-open-conns-served "want all 8 held connections answered, pod4 among them: $d"; fi
  r=$(client http http://10.96.0.100:8080/ --count 60 --timeout 3 --max-time 60)
  d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
  if [ -z "$d" ]; then pass drain-no-new-flows; else fail drain-no-new-flows "want 0 failed, none to pod4: $d"; fi
  local t_removed
  t_removed=$(date +%s)
  d=$(ipvs_diff --draining 10.244.3.44:8080)
  if [ -z "$d" ]; then pass ipvsadm-after-removal; else fail ipvsadm-after-removal "$d"; fi

  # ---- no endpoints, UDP, affinity ----------------------------------------------------------
  local rej_before rej_after
  rej_count() { inlb iptables -w 5 -t filter -L VIPD-IPVS-SERVICES -v -n -x 2>/dev/null | awk '$3 == "REJECT" {s += $1} END {print s + 0}'; }
  rej_before=$(rej_count)
  out=$(client connect 10.96.0.101:80 --timeout 3)
  rej_after=$(rej_count)
  if [ "$out" = refused ] && [ "$rej_after" -gt "$rej_before" ]; then pass no-endpoints-refused
  else fail no-endpoints-refused "connect 10.96.0.101:80: '$out' (want refused); REJECT counter $rej_before -> $rej_after"; fi
  r=$(client udp 10.96.0.101:53 --count 3 --timeout 1 --max-time 10)
  d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
  if [ -z "$d" ]; then pass udp-no-endpoints-refused; else fail udp-no-endpoints-refused "want 3 x ConnectionRefusedError: $d"; fi
  r=$(client udp 10.96.0.100:9053 --count 60 --timeout 1 --max-time 60)
  d=$(judge "$r" 'r["ok"] >= 57 and set(pods) == {"pod1", "pod2", "pod3"}')
  if [ -z "$d" ]; then pass udp-roundtrip; else fail udp-roundtrip "want >= 57 of 60 from pod1..3 (pod4's UDP real server deleted at once): $d"; fi
  r=$(client http http://10.96.0.102:8080/ --count 40 --timeout 3 --max-time 60)
  d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 40 and len(pods) == 1')
  if [ -z "$d" ]; then pass affinity; else fail affinity "want 40 answers from one pod: $d"; fi

  # ---- restart while requests run ---------------------------------------------------------
  ipvs_diff --draining 10.244.3.44:8080 >/dev/null
  cp "$G/have.txt" "$G/before-restart.txt"
  client http http://10.96.0.100:8080/ --count 150 --interval 0.02 --timeout 3 --max-time 90 >"$G/restart.out" 2>&1 &
  local bg=$!
  BG_PIDS+=("$bg")
  sleep 1
  stop_vipd
  local down_ok=1
  pgrep -x vipd >/dev/null && down_ok=0   # the guest runs no other vipd
  sleep 1
  start_vipd
  st=$(wait_gen_above 0) || st=
  wait "$bg" 2>/dev/null
  r=$(tail -n 1 "$G/restart.out")
  d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 150 and n("pod4") == 0')
  if [ "$down_ok" = 1 ] && [ -n "$st" ] && [ -z "$d" ]; then pass restart-no-failures
  else fail restart-no-failures "vipd stopped: $down_ok; new vipd synced: ${st:+yes}; requests: ${d:-ok}"; fi
  d=$(ipvs_diff --draining 10.244.3.44:8080)
  out=$(inlb iptables-save | grep -c -- '-j VIPD-IPVS-')
  note "after the restart: status ipvs $(jget "$st" ipvs | head -c 300)"
  if [ -z "$d" ] && [ "$out" -eq 4 ] && [ "$(jget "$st" ipvs.stale_services_deleted)" = 0 ]; then
    pass restart-same-state
  else
    fail restart-same-state "diff: ${d:-none}; jump rules: $out (want 4); stale deleted: $(jget "$st" ipvs.stale_services_deleted)"
  fi

  # ---- tamper with the kernel while vipd is down, then restart --------------------------------
  stop_vipd
  pgrep -x vipd >/dev/null && fail reconcile-tampered "vipd still running after SIGTERM"
  # (schedulers loaded in the guest: rr wrr sh mh)
  local tamper_ok=1
  { ip -n "${P}lb" addr add 10.96.0.200/32 dev vipd-ipvs0 &&
    inlb ipvsadm -A -t 10.96.0.200:80 -s rr &&                      # stale: on vipd's interface
    inlb ipvsadm -A -t 172.16.0.1:80 -s sh &&                       # another tool's
    inlb ipvsadm -E -t 10.96.0.100:8080 -s wrr &&                   # wrong scheduler
    inlb ipvsadm -e -t 10.96.0.100:8080 -r 10.244.1.15:8080 -m -w 5 &&  # wrong weight
    inlb ipvsadm -d -t 10.96.0.100:8080 -r 10.244.2.88:8080 &&       # missing real server
    inlb ipvsadm -E -t 10.96.0.102:8080 -s rr; } || tamper_ok=0     # persistence lost
  local tamper6_ok=1   # the same for IPv6: a stale service on vipd's interface, a wrong weight, a missing real server
  { ip -n "${P}lb" addr add fd00:96::200/128 dev vipd-ipvs0 nodad &&
    inlb ipvsadm -A -t "[fd00:96::200]:80" -s rr &&
    inlb ipvsadm -e -t "[fd00:96::100]:8080" -r "[fd00:244::1:15]:8080" -m -w 3 &&
    inlb ipvsadm -d -u "[fd00:96::100]:9053" -r "[fd00:244::2:88]:9053"; } || tamper6_ok=0
  d=$(ipvs_diff --draining 10.244.3.44:8080 --ignore "TCP 172.16.0.1:80")
  note "tampered: $d"
  [ "$(tr ';' '\n' <<<"$d" | grep -c .)" -ge 5 ] || tamper_ok=0
  [ "$(tr ';' '\n' <<<"$d" | grep -c 'fd00:')" -ge 3 ] || tamper6_ok=0
  start_vipd
  st=$(wait_gen_above 0) || st=
  d=$(ipvs_diff --draining 10.244.3.44:8080 --ignore "TCP 172.16.0.1:80")
  out=$(ip -n "${P}lb" -4 addr show dev vipd-ipvs0)
  local out6
  out6=$(ip -n "${P}lb" -6 addr show dev vipd-ipvs0)
  if [ "$tamper6_ok" = 1 ] && [ -n "$st" ] && [ -z "$d" ] && ! grep -q 'fd00:96::200' <<<"$out6" &&
     ! grep -q 'fd00:96::200' "$G/have.txt" && grep -q 'inet6 fd00:96::100/128' <<<"$out6"; then
    pass v6-reconcile-tampered
  else
    fail v6-reconcile-tampered "tampering worked: $tamper6_ok; diff after restart: ${d:-none}; fd00:96::200 still bound: $(grep -c fd00:96::200 <<<"$out6"), in ipvsadm: $(grep -c fd00:96::200 "$G/have.txt")"
  fi
  if [ "$tamper_ok" = 1 ] && [ -n "$st" ] && [ -z "$d" ] && ! grep -q '10\.96\.0\.200' <<<"$out" &&
     grep -q '^TCP  172\.16\.0\.1:80 sh' "$G/have.txt" && [ "$(jget "$st" ipvs.stale_services_deleted)" = 2 ]; then
    pass reconcile-tampered
  else
    fail reconcile-tampered "tampering worked: $tamper_ok; diff after restart: ${d:-none}; 10.96.0.200 still bound: $(grep -c 10.96.0.200 <<<"$out"); foreign kept: $(grep -c '172.16.0.1' "$G/have.txt"); status: $(jget "$st" ipvs | head -c 300)"
  fi
  inlb ipvsadm -D -t 172.16.0.1:80 || note "warning: the foreign service 172.16.0.1:80 was not there to delete"

  # ---- a whole service goes -----------------------------------------------------------------
  gen=$(generation_of "$(status_json)")
  rm -f "$G/manifests/sticky.yaml"
  st=$(wait_gen_above "$gen") || st=
  d=$(ipvs_diff --draining 10.244.3.44:8080)
  out=$(ip -n "${P}lb" -4 addr show dev vipd-ipvs0)
  if [ -n "$st" ] && [ -z "$d" ] && ! grep -q '10\.96\.0\.102' <<<"$out" && ! grep -q '10\.96\.0\.102' "$G/have.txt"; then
    pass service-removed-unbound
  else
    fail service-removed-unbound "diff: ${d:-none}; addresses: $(grep -o 'inet [0-9./]*' <<<"$out" | tr '\n' ' ')"
  fi
  # ---- a kernel error: scheduler lc is not loaded in the guest (ENOENT) ---------------------
  printf '%s\n' "apiVersion: v1" "kind: Service" \
    "metadata: {name: lcsvc, namespace: default, annotations: {vipd.io/scheduler: lc}}" \
    "spec: {clusterIP: 10.96.0.103, ports: [{name: http, port: 8080, protocol: TCP}]}" >"$G/stage-lc.yaml"
  install_manifest "$G/stage-lc.yaml" "$G/manifests/lcsvc.yaml"
  local errline=
  for _ in $(seq 1 100); do   # bounded: ~20 s
    st=$(status_json) && errline=$(jget "$st" last_error) && [ -n "$errline" ] && break
    sleep 0.2
  done
  note "with scheduler lc: last_error '$errline'"
  # Back to the applied table: the generation stays, a full sync clears the error.
  local fulls
  fulls=$(jget "$(status_json)" full_syncs)
  rm -f "$G/manifests/lcsvc.yaml"
  st=
  for _ in $(seq 1 150); do   # bounded: ~30 s
    out=$(status_json) && [ -z "$(jget "$out" last_error)" ] && [ "$(jget "$out" full_syncs)" -gt "${fulls:-0}" ] 2>/dev/null &&
      { st=$out; break; }
    sleep 0.2
  done
  d=$(ipvs_diff --draining 10.244.3.44:8080)
  if grep -q 'add service TCP 10.96.0.103:8080 (scheduler lc).*ENOENT.*modprobe ip_vs_<scheduler>' <<<"$errline" &&
     [ "$(grep -c . <<<"$errline")" -eq 1 ] && vipd_alive && [ -n "$st" ] && [ -z "$d" ] &&
     [ "$(jget "$st" ipvs.failures)" -ge 1 ] 2>/dev/null; then
    pass kernel-error-resync
  else
    fail kernel-error-resync "want one-line ENOENT error naming the scheduler, then a clean full sync once lcsvc is gone: error '$errline', alive: $(vipd_alive && echo yes), resynced: ${st:+yes}, diff: ${d:-none}"
  fi

  out=$(vipctl list 2>&1)
  st=$(status_json)
  if grep -q '10\.96\.0\.100' <<<"$out" && [ "$(jget "$st" mode)" = ipvs ] && [ -n "$(jget "$st" ipvs.netlink_ops)" ]; then
    pass vipctl
  else
    fail vipctl "list: $(head -c 200 <<<"$out" | tr '\n' ' '); status: $(head -c 200 <<<"$st")"
  fi

  # ---- IPv6 (runs while pod4's IPv4 real server drains) ------------------------------------
  local t6 fwd6 ipt6 n6
  t6=$(date +%s)
  out=$(ip -n "${P}lb" -6 addr show dev vipd-ipvs0 2>&1)
  fwd6=$(inlb cat /proc/sys/net/ipv6/conf/all/forwarding 2>&1)
  ipt6=$(inlb ip6tables-save 2>&1)
  n6=$(inlb ipvsadm -Ln | awk '$1 == "TCP" || $1 == "UDP" { cur = $1 " " $2 }
    cur == "TCP [fd00:96::100]:8080" && $1 == "->" && $2 ~ /^\[fd00:244::/ { n++ } END { print n + 0 }')
  if [ "$(grep -c 'inet6 fd00:96::10[01]/128' <<<"$out")" -eq 2 ] && [ "$fwd6" = 1 ] && [ "$n6" = 4 ] &&
     [ "$(grep -c '^-A POSTROUTING .*-j VIPD-IPVS-POSTROUTING' <<<"$ipt6")" -eq 1 ] &&
     [ "$(grep -c '^-A INPUT .*-j VIPD-IPVS-SERVICES' <<<"$ipt6")" -eq 1 ] &&
     grep -q '^-A VIPD-IPVS-POSTROUTING .*-m ipvs .*-j MASQUERADE' <<<"$ipt6" &&
     grep -q '^-A VIPD-IPVS-SERVICES .*fd00:96::101/128.*--dport 80 .*-j REJECT --reject-with icmp6-port-unreachable' <<<"$ipt6" &&
     ! grep -q '10\.96\.' <<<"$ipt6"; then
    pass v6-programmed
  else
    fail v6-programmed "want fd00:96::100,101/128 on vipd-ipvs0 ($(grep -o 'inet6 [0-9a-f:/]*' <<<"$out" | tr '\n' ' ')), IPv6 forwarding 1 ($fwd6), 4 IPv6 real servers of db6 ($n6), ip6tables chains+jumps once: $(grep VIPD <<<"$ipt6" | tr '\n' '|' | head -c 500)"
  fi
  r=$(client http "http://[fd00:96::100]:8080/" --count 100 --timeout 3 --max-time 60)
  note "IPv6, 100 requests: $r"
  d=$(judge "$r" 'r["failed"] == 0 and all(20 <= n("pod%d" % i) <= 30 for i in range(1, 5))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-http-four-pods; else fail v6-http-four-pods "want 0 failed, 20..30 per pod (rr): ${d:-no result}"; fi

  # pod4 leaves db6's slice while requests run (they reached pod4 first): weight
  # 0 in the kernel, no request fails. Change-to-kernel time: from the manifest's
  # rename to vipd's "draining" line (logged once the kernel acked the weight 0),
  # and to the first `ipvsadm -Ln` that shows it (polled: an upper bound).
  local c6_0 c6 bg6 t_mv t_seen='' t_log='' w6 line6 _a _i
  read -r _ _a _i <<<"$(dest_info "TCP [fd00:96::100]:8080" "[fd00:244::3:44]:8080")"
  c6_0=$(( ${_a:-0} + ${_i:-0} ))
  client http "http://[fd00:96::100]:8080/" --count 80 --interval 0.02 --timeout 3 --max-time 60 >"$G/during6.out" 2>&1 &
  bg6=$!
  BG_PIDS+=("$bg6")
  for _ in $(seq 1 100); do   # bounded: ~10+ s
    read -r _ _a _i <<<"$(dest_info "TCP [fd00:96::100]:8080" "[fd00:244::3:44]:8080")"
    c6=$(( ${_a:-0} + ${_i:-0} ))
    [ "$c6" -gt "$c6_0" ] && break
    sleep 0.1
  done
  write_slice6 "$G/stage6.yaml" "${POD6_ALL[@]:0:3}"
  t_mv=$(date +%s%3N)
  install_manifest "$G/stage6.yaml" "$G/manifests/endpointslice-db6.yaml"
  while [ $(( $(date +%s%3N) - t_mv )) -lt 10000 ]; do   # bounded: 10 s
    read -r w6 _ <<<"$(dest_info "TCP [fd00:96::100]:8080" "[fd00:244::3:44]:8080")"
    if [ "$w6" = 0 ]; then t_seen=$(( $(date +%s%3N) - t_mv )); break; fi
    sleep 0.01
  done
  line6=$(grep -m 1 'real server \[fd00:244::3:44\]:8080 of TCP \[fd00:96::100\]:8080 draining' "$G/vipd.log")
  if [[ $line6 =~ ^([0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3})Z ]]; then
    t_log=$(( $(date -u -d "$(date -u +%F) ${BASH_REMATCH[1]}" +%s%3N) - t_mv ))
  fi
  note "IPv6: change to kernel (pod4's IPv6 real server at weight 0): ${t_log:-?} ms by vipd's log, ${t_seen:-not within 10 s} ms until ipvsadm -Ln showed it; vipd's sync $(jget "$(status_json)" ipvs.last_sync_ms) ms"
  wait "$bg6" 2>/dev/null
  r=$(tail -n 1 "$G/during6.out")
  note "IPv6 requests during the change: $r"
  d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 80 and n("pod4") >= 1')
  if [ -n "$t_seen" ] && [ -z "$d" ]; then pass v6-removal-no-failures
  else fail v6-removal-no-failures "want pod4 at weight 0 within 10 s (${t_seen:-not}) and 80 ok, 0 failed, pod4 reached before the change: ${d:-ok}"; fi
  r=$(client http "http://[fd00:96::100]:8080/" --count 30 --timeout 3 --max-time 60)
  d=$(judge "$r" 'r["failed"] == 0 and n("pod4") == 0 and all(n("pod%d" % i) > 0 for i in range(1, 4))')
  if [ -z "$d" ] && [ -n "$r" ]; then pass v6-removed-no-new-flows; else fail v6-removed-no-new-flows "want 0 failed, none to pod4: ${d:-no result}"; fi

  rej6_count() { inlb ip6tables -w 5 -t filter -L VIPD-IPVS-SERVICES -v -n -x 2>/dev/null | awk '$3 == "REJECT" {s += $1} END {print s + 0}'; }
  rej_before=$(rej6_count)
  out=$(client connect "[fd00:96::101]:80" --timeout 3)
  r=$(client udp "[fd00:96::101]:53" --count 3 --timeout 1 --max-time 10)
  rej_after=$(rej6_count)
  d=$(judge "$r" 'r["ok"] == 0 and r["errors"].get("ConnectionRefusedError", 0) == 3')
  if [ "$out" = refused ] && [ -z "$d" ] && [ "$rej_after" -ge $((rej_before + 4)) ]; then pass v6-no-endpoints-refused
  else fail v6-no-endpoints-refused "connect [fd00:96::101]:80: '$out' (want refused); UDP :53 ${d:-ok}; ip6tables REJECT counter $rej_before -> $rej_after (want +4)"; fi
  note "IPv6 checks took $(( $(date +%s) - t6 )) s"

  # ---- pod4 deleted once its connections are gone (TIME_WAIT: 120 s in IPVS) -------------------
  local gone=
  # Bounded: 300 s after the removal (a loaded host slows the guest's clock:
  # 120 s of IPVS time took up to ~190 s), and 40 s before the VM's own limit.
  local limit=$(( ${VM_TIMEOUT:-500} - 40 ))
  for _ in $(seq 1 150); do
    [ -z "$(dest_info "TCP 10.96.0.100:8080" 10.244.3.44:8080)" ] && { gone=1; break; }
    [ $(( $(date +%s) - t_removed )) -gt 300 ] && break
    [ $(( $(date +%s) - t0 )) -gt "$limit" ] && break
    sleep 2
  done
  if [ -n "$gone" ]; then note "pod4's real server deleted $(( $(date +%s) - t_removed )) s after its removal"
  else note "pod4's real server still there $(( $(date +%s) - t_removed )) s after its removal"; fi
  # (pod4's IPv6 real server, removed later, may still drain.)
  if [ -n "$gone" ] && grep -q 'real server 10.244.3.44:8080 of TCP 10.96.0.100:8080 drained' "$G/vipd.log" &&
     [ -z "$(ipvs_diff --draining "[fd00:244::3:44]:8080")" ]; then
    pass graceful-drain-deleted
  else
    fail graceful-drain-deleted "pod4 still in ipvsadm -Ln or no 'drained' log line: $(tr '\n' '|' <"$G/cur.txt")"
  fi
  if stop_vipd; then pass vipd-clean-exit; else fail vipd-clean-exit "vipd exit status after SIGTERM was not 0"; fi
  note "guest checks took $(( $(date +%s) - t0 )) s"
  return 0
}
