#!/usr/bin/env bash
# Certifies the CPU reference backend across stand-in hosts: network
# namespaces cc-h0..cc-h{N-1}, joined by a bridge in a namespace of its own,
# on 10.231.7.0/24 with no route out; mpirun starts one rank per host through
# an rsh agent that enters the namespace, and COMMCHECK_MESH_ADDRESS puts the
# kit's control plane and the CPU backend's transport on that network.
#
#   .ci/hosts.sh REPORT_BINARY N OUT   # certify across N hosts (needs root)
#
# Checks: level full, every M-class case passes and ran on worlds across
# hosts, the report lists every host's address. Without permission for
# `ip netns` it says so in one line and exits 0 (nothing is claimed).
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
binary=$(realpath "$1") hosts=$2 out=$3
net=10.231.7
if ! ip netns add cc-probe 2>/dev/null; then
  echo "hosts.sh: skipped: this machine does not permit 'ip netns add' (needs root and network namespaces)"
  exit 0
fi
ip netns del cc-probe
agent=""
cleanup() {
  for i in $(seq 0 $((hosts - 1))); do ip netns pids "cc-h$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
  for i in $(seq 0 $((hosts - 1))); do ip netns del "cc-h$i" 2>/dev/null || true; done
  ip netns del cc-sw 2>/dev/null || true
  [ -z "$agent" ] || rm -rf "$agent"
}
trap cleanup EXIT
cleanup
agent=$(mktemp -d)
ip netns add cc-sw
ip -n cc-sw link add br0 type bridge
ip -n cc-sw link set br0 up
places=""
for i in $(seq 0 $((hosts - 1))); do
  ip netns add "cc-h$i"
  ip link add "cc-v$i" type veth peer name "cc-p$i"
  ip link set "cc-v$i" netns "cc-h$i"
  ip link set "cc-p$i" netns cc-sw
  ip -n cc-sw link set "cc-p$i" master br0 up
  ip -n "cc-h$i" addr add "$net.$((i + 1))/24" dev "cc-v$i"
  ip -n "cc-h$i" link set "cc-v$i" up
  ip -n "cc-h$i" link set lo up
  places="$places${places:+,}cc-h$i:1"
done
# The links come up asynchronously: wait (up to 20 s) until every host
# reaches every other, so that mpirun's daemons can call back. A TCP connect
# to a closed port (bash's /dev/tcp, no tool needed) answers "refused" once
# the route works.
reaches() {
  local said
  said=$(ip netns exec "cc-h$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) && return 0
  [[ $said == *refused* ]]
}
for i in $(seq 0 $((hosts - 1))); do
  for j in $(seq 0 $((hosts - 1))); do
    tries=0
    until reaches "$i" "$net.$((j + 1))"; do
      tries=$((tries + 1))
      [ "$tries" -lt 40 ] || { echo "hosts.sh: host cc-h$i cannot reach $net.$((j + 1))"; exit 1; }
      sleep 0.5
    done
  done
done
# mpirun's rsh agent: HOST COMMAND... runs COMMAND in namespace HOST.
cat >"$agent/netns-rsh" <<'AGENT'
#!/bin/sh
host="$1"; shift
exec ip netns exec "$host" /bin/sh -c "$*"
AGENT
chmod +x "$agent/netns-rsh"
rm -rf "$out"
launch() {
  ip netns exec cc-h0 mpirun --mca plm_rsh_agent "$agent/netns-rsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca routed direct --host "$places" -n "$hosts" \
    --mca oob_tcp_if_include "$net.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" \
    -x COMMCHECK_MESH_ADDRESS -x PATH "$binary" certify cpu --out "$@"
}
# Without the setting the ranks listen on loopback: an error at once,
# naming the setting (not a connect limit's wait).
unset COMMCHECK_MESH_ADDRESS
if launch "$out-loopback" >"$agent/loopback.log" 2>&1; then
  echo "hosts.sh: a launch across hosts on loopback listeners succeeded"
  exit 1
fi
grep -q 'set COMMCHECK_MESH_ADDRESS' "$agent/loopback.log" || {
  tail -n 20 "$agent/loopback.log"
  echo "hosts.sh: a launch across hosts on loopback listeners did not name COMMCHECK_MESH_ADDRESS"
  exit 1
}
echo "without COMMCHECK_MESH_ADDRESS: refused, naming the setting"
export COMMCHECK_MESH_ADDRESS="$net.0/24"
launch "$out" | tail -n 3
"$binary" verify "$out/report.json"
python3 - "$out/report.json" "$hosts" "$net" <<'PY'
import json, sys
report, hosts, net = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
assert report["level"] == "full", f"level {report['level']}, not full"
assert report["provenance"].get("processes") == hosts, "the report does not say it ran across the hosts"
m = [c for c in report["cases"] if c["class"] == "M"]
assert all(c["status"] == "pass" for c in m), "an M-class case did not pass"
across = [c for c in m if max(c["worlds"], default=0) >= 2]
text = json.dumps(report["provenance"])
missing = [f"{net}.{i + 1}" for i in range(hosts) if f"{net}.{i + 1}" not in text]
assert not missing, f"the report's provenance does not list the hosts {missing}: {report['provenance']}"
print(f"across {hosts} hosts: level full, {len(across)} M-class cases on worlds across hosts, provenance lists every host")
PY
