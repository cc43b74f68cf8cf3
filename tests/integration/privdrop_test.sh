#!/usr/bin/env bash
# usage: tests/integration/privdrop_test.sh
#
# vipd --user (docs/security.md "Privileges"), dpdk mode in the lab:
#   - a user that does not exist, root, a user in the supplementary group
#     disk (created for the test), and --user in iptables mode are refused
#     with one line and exit status 2, before anything starts;
#   - control: without --user, the thread check below finds root threads
#     (so the check can fail);
#   - with --user nobody, EVERY thread of vipd (main, DPDK worker lcore, EAL
#     interrupt thread, control-plane threads), read from /proc/PID/task, has
#     the four uids and gids of nobody, no permitted, effective or ambient
#     capability, and no_new_privs; `vipctl status` says the same;
#   - after the drop vipd still forwards (0 failed requests), still follows a
#     manifest change (an endpoint removed: no new flow reaches it), and stops
#     cleanly on SIGTERM;
#   - a manifests directory the user cannot read stops the start with a clear
#     error instead of a vipd that never syncs; so does, with the Kubernetes
#     source (the test API server over HTTPS, tests/kube/fake_apiserver.py), a
#     client key the user cannot read (curl reads it at every TLS handshake),
#     and with it readable, vipd --user nobody lists the API's services after
#     the drop (skipped loudly without openssl or curl).
# Prints PASS:/FAIL:/SKIP: lines; exit 0 all passed, 1 any failed, 77 cannot run.
set -uo pipefail
NAME="privdrop_test"
CHECKS=(unknown-user-refused root-user-refused disk-group-user-refused kernel-mode-refused control-root-detected
        starts-as-nobody
        every-thread-dropped status-reports-drop forwards-after-drop manifest-change-after-drop
        stops-cleanly unreadable-manifests-refused unreadable-kube-key-refused kube-syncs-after-drop)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_netns bridge
require_vipd
if ! getent passwd nobody >/dev/null; then skip_all "no user 'nobody' on this machine"; fi
NOBODY_UID=$(id -u nobody)
NOBODY_GID=$(id -g nobody)

export LAB_PREFIX="pd$$-"
P=$LAB_PREFIX
TMP=$(mktemp -d /tmp/vipd-privdrop.XXXXXX)
chmod 0755 "$TMP"  # the manifests below must be readable by nobody
api_init                # the test API server (lib.sh), for the Kubernetes checks at the end
DISK_USER="vipd-pd$$"   # an otherwise unprivileged user in the group disk
cleanup_extra() { stop_pid "$API_PID"; userdel "$DISK_USER" >/dev/null 2>&1 || true; }
lib_traps

start_vipd() {  # extra vipd options...
  ip netns exec "${P}lb" "$VIPD" --config config/demo/vipd.conf \
    --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
    "--eal-args=--no-huge -m 512 --no-shconf --file-prefix ${P}vipd" "$@" \
    </dev/null >>"$TMP/vipd.log" 2>&1 &
  VIPD_PID=$!
  wait_generation 1
}

# Every thread of PID, from /proc: a JSON summary.
threads_of() {
  "$PYTHON" - "$1" <<'PY'
import glob, json, sys
out = []
for f in glob.glob("/proc/%s/task/*/status" % sys.argv[1]):
    try:
        st = dict(l.split(":", 1) for l in open(f).read().splitlines() if ":" in l)
    except OSError:
        continue  # the thread ended
    g = lambda k: st.get(k, "").split()
    out.append({"name": st["Name"].strip(), "uid": [int(x) for x in g("Uid")], "gid": [int(x) for x in g("Gid")],
                "groups": [int(x) for x in g("Groups")], "prm": int(st["CapPrm"], 16), "eff": int(st["CapEff"], 16),
                "amb": int(st.get("CapAmb", "0"), 16), "nnp": int(st.get("NoNewPrivs", "-1"))})
print(json.dumps(out))
PY
}

lab_up
mkdir -p "$TMP/manifests"
cp config/demo/manifests/*.yaml "$TMP/manifests/"
chmod 0644 "$TMP/manifests"/*.yaml

# --- refused before anything starts ---
expect_config_error() {  # check want-substring vipd-args...
  local check=$1 want=$2 out rc
  shift 2
  out=$(timeout 30 "$VIPD" --config config/demo/vipd.conf --manifests-dir "$TMP/manifests" \
          --admin-socket "$TMP/refused.sock" "$@" 2>&1 </dev/null)
  rc=$?
  if [ "$rc" = 2 ] && [[ $out == *"$want"* ]] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ]; then pass "$check"
  else fail "$check" "want exit 2 and one line with '$want', got $rc: $(printf '%s' "$out" | head -c 300)"; fi
}
expect_config_error unknown-user-refused "config: --user 'no-such-user-vipd': no such user" --user no-such-user-vipd
expect_config_error root-user-refused "config: --user 'root': is uid 0" --user root
if ! getent group disk >/dev/null; then skip disk-group-user-refused "no group disk on this machine"
elif ! useradd -M -N -G disk -s /usr/sbin/nologin "$DISK_USER" 2>"$TMP/useradd.err"; then
  skip disk-group-user-refused "useradd failed: $(head -c 200 "$TMP/useradd.err")"
else
  expect_config_error disk-group-user-refused \
    "config: --user '$DISK_USER': is in supplementary group $(getent group disk | cut -d: -f3) (disk), a privileged group" \
    --user "$DISK_USER"
fi
expect_config_error kernel-mode-refused "config: --user 'nobody': only dpdk mode drops privileges" \
  --mode iptables --user nobody

# --- control: without --user every thread is root ---
if start_vipd; then
  t=$(threads_of "$VIPD_PID")
  d=$("$PYTHON" -c '
import json, sys
t = json.loads(sys.argv[1])
root = [x for x in t if 0 in x["uid"] or x["eff"]]
print("" if t and len(root) == len(t) else "want every thread root, got %s" % sys.argv[1][:400])' "$t")
  if [ -z "$d" ]; then pass control-root-detected; else fail control-root-detected "$d"; fi
  note "without --user: $(grep -c . <<<"$(tr '}' '\n' <<<"$t")") thread records, all root"
else
  fail control-root-detected "vipd without --user did not start: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
fi
stop_pid "$VIPD_PID"; VIPD_PID=

# --- with --user nobody ---
: >"$TMP/vipd.log"
if start_vipd --user nobody; then pass starts-as-nobody
else fail starts-as-nobody "$(tail -n 3 "$TMP/vipd.log" | tr '\n' ' ')"; exit 1; fi
note "$(grep 'dropped privileges' "$TMP/vipd.log" | tail -n 1)"

t=$(threads_of "$VIPD_PID")
d=$("$PYTHON" -c '
import json, sys
t, uid, gid = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
bad = [x for x in t if x["uid"] != [uid] * 4 or x["gid"] != [gid] * 4 or x["prm"] or x["eff"] or x["amb"]
       or x["nnp"] != 1 or any(g == 0 for g in x["groups"])]
names = sorted(x["name"] for x in t)
problems = []
if bad: problems.append("threads not dropped: %s" % json.dumps(bad)[:400])
if not any(n.startswith(("rte-worker", "lcore-worker")) for n in names): problems.append("no DPDK worker thread seen")
if len(t) < 3: problems.append("only %d threads" % len(t))
print("; ".join(problems) + ("" if not problems else " (threads: %s)" % names))' "$t" "$NOBODY_UID" "$NOBODY_GID")
NTHREADS=$("$PYTHON" -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$t")
if [ -z "$d" ]; then pass every-thread-dropped; note "$NTHREADS threads, each uid/gid $NOBODY_UID/$NOBODY_GID, CapPrm=CapEff=CapAmb=0, NoNewPrivs=1"
else fail every-thread-dropped "$d"; fi

st=$(status_json)
d=$("$PYTHON" -c '
import json, sys
p = json.loads(sys.argv[1])["privileges"]
ok = p["user"] == "nobody" and p["uid"] == int(sys.argv[2]) and p["privileged_threads"] == 0 \
     and p["threads"] >= 3 and p["no_new_privs_threads"] == p["threads"]
print("" if ok else json.dumps(p))' "$st" "$NOBODY_UID" 2>&1)
if [ -z "$d" ]; then pass status-reports-drop; note "$(vipctl status | grep Privileges)"
else fail status-reports-drop "want user nobody, 0 privileged threads in vipctl status: $d"; fi

r=$(client http http://10.96.0.100:8080/ --count 60 --timeout 5 --max-time 60)
note "after the drop: $r"
d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 60 and len(pods) >= 2')
if [ -z "$d" ]; then pass forwards-after-drop; else fail forwards-after-drop "want 60 answered, 0 failed: $d"; fi

g0=$(generation)
slice_without "$TMP/manifests/endpointslice-db.yaml" 10.244.2.88 >/dev/null
if wait_generation $((g0 + 1)) 100; then
  r=$(client http http://10.96.0.100:8080/ --count 40 --timeout 5 --max-time 60)
  note "after removing pod2 (10.244.2.88): $r"
  d=$(judge "$r" 'r["failed"] == 0 and r["ok"] == 40 and n("pod2") == 0')
  if [ -z "$d" ]; then pass manifest-change-after-drop; else fail manifest-change-after-drop "want 40 answered, none by pod2: $d"; fi
else
  fail manifest-change-after-drop "the generation stayed at $g0 after the manifest change: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
fi

kill -TERM "$VIPD_PID"
rc=
for _ in $(seq 1 100); do kill -0 "$VIPD_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$VIPD_PID" 2>/dev/null; then
  fail stops-cleanly "still running 10 s after SIGTERM"
  stop_pid "$VIPD_PID" KILL
else
  wait "$VIPD_PID"; rc=$?
  if [ "$rc" = 0 ]; then pass stops-cleanly; else fail stops-cleanly "exit status $rc: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"; fi
fi
VIPD_PID=

# --- a manifests directory nobody cannot read ---
chmod 0700 "$TMP/manifests"
: >"$TMP/vipd.log"
ip netns exec "${P}lb" timeout 60 "$VIPD" --config config/demo/vipd.conf \
  --manifests-dir "$TMP/manifests" --admin-socket "$TMP/admin.sock" \
  "--eal-args=--no-huge -m 512 --no-shconf --file-prefix ${P}vipd" --user nobody \
  </dev/null >>"$TMP/vipd.log" 2>&1
rc=$?
chmod 0755 "$TMP/manifests"
if [ "$rc" = 1 ] && grep -q "cannot read --manifests-dir $TMP/manifests" "$TMP/vipd.log"; then pass unreadable-manifests-refused
else fail unreadable-manifests-refused "want exit 1 and 'cannot read --manifests-dir', got $rc: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"; fi

# --- the Kubernetes source: what curl reads again after the drop ---
if ! command -v openssl >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  skip unreadable-kube-key-refused "openssl CLI or curl not installed"
  skip kube-syncs-after-drop "openssl CLI or curl not installed"
  exit 0
fi
ip -n "${P}lb" link set dev lo up
if ! tests/kube/gen_certs.sh "$TMP/pki" >/dev/null 2>&1; then
  fail unreadable-kube-key-refused "tests/kube/gen_certs.sh failed"
  exit 1
fi
"$PYTHON" - "$TMP/objects.json" <<'PY'
import json, sys
svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
       "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.77", "clusterIPs": ["10.96.0.77"],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}}
json.dump({"items": [svc]}, open(sys.argv[1], "w"))
PY
if ! start_api --load "$TMP/objects.json"; then
  fail unreadable-kube-key-refused "the test API server did not start: $(tail -n 3 "$TMP/api.log" | tr '\n' ' ')"
  exit 1
fi
api_kubeconfig "$TMP/kubeconfig"
chmod 0755 "$TMP/pki"
chmod 0644 "$TMP/kubeconfig" "$TMP/pki/ca.crt" "$TMP/pki/client.crt"
chmod 0600 "$TMP/pki/client.key"  # root's alone
kube_vipd() {  # [--timeout S]: vipd --user nobody on the test API server, in the lb namespace
  local pre=()
  if [ "${1:-}" = --timeout ]; then pre=(timeout "$2"); shift 2; fi
  ip netns exec "${P}lb" "${pre[@]}" "$VIPD" --config config/demo/vipd.conf --kubeconfig "$TMP/kubeconfig" \
    --admin-socket "$TMP/admin.sock" --api-backoff-initial-ms 100 --api-backoff-max-ms 1000 \
    "--eal-args=--no-huge -m 512 --no-shconf --file-prefix ${P}vipd" --user nobody </dev/null >>"$TMP/vipd.log" 2>&1
}
: >"$TMP/vipd.log"
kube_vipd --timeout 60
rc=$?
if [ "$rc" = 1 ] && grep -q "cannot read the client key of kubeconfig $TMP/kubeconfig.* $TMP/pki/client.key: Permission denied" "$TMP/vipd.log"; then
  pass unreadable-kube-key-refused
else
  fail unreadable-kube-key-refused "want exit 1 and 'cannot read the client key ... $TMP/pki/client.key', got $rc: $(tail -n 2 "$TMP/vipd.log" | tr '\n' ' ')"
fi

chmod 0644 "$TMP/pki/client.key"
: >"$TMP/vipd.log"
kube_vipd &
VIPD_PID=$!
if wait_generation 1 && grep -q "dropped privileges: now nobody" "$TMP/vipd.log" && grep -q '10\.96\.0\.77' <<<"$(vipctl list 2>/dev/null)"; then
  pass kube-syncs-after-drop
else
  fail kube-syncs-after-drop "want generation >= 1 and 10.96.0.77 listed after the drop: $(tail -n 3 "$TMP/vipd.log" | tr '\n' ' ')"
fi
