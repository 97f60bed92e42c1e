#!/usr/bin/env bash
# Certifies the CPU reference backend across stand-in hosts (.ci/netns.sh:
# network namespaces on a private network, mpirun with a hostfile through an
# rsh agent that enters them, COMMCHECK_MESH_ADDRESS picking the network).
#
#   .ci/hosts.sh REPORT_BINARY N OUT   # certify across N hosts (needs root)
#
# Checks: level full, every M-class case passes and ran on worlds across
# hosts, the report lists every host's address. Without permission for
# `ip netns` it says so in one line and exits 0 (nothing is claimed).
set -euo pipefail
. "$(dirname "$0")/netns.sh"
binary=$(realpath "$1") hosts=$2 out=$3
netns_permitted
trap netns_cleanup EXIT
netns_hosts "$hosts"
rm -rf "$out"
unset COMMCHECK_CASE_TIMEOUT_MS COMMCHECK_GRACE_MS COMMCHECK_RESULTS
# Without the setting the ranks listen on loopback: an error at once,
# naming the setting (not a connect limit's wait).
unset COMMCHECK_MESH_ADDRESS
NETNS_LIMIT=120 netns_watched "$netns_dir/loopback.log" 'set COMMCHECK_MESH_ADDRESS' \
  "$binary" certify cpu --out "$out-loopback"
if wait "$netns_pid"; then
  head -n 30 "$netns_dir/loopback.log"; echo "hosts.sh: a launch across hosts on loopback listeners succeeded"
  exit 1
fi
grep -q 'set COMMCHECK_MESH_ADDRESS' "$netns_dir/loopback.log" || {
  tail -n 20 "$netns_dir/loopback.log"
  echo "hosts.sh: a launch across hosts on loopback listeners did not name COMMCHECK_MESH_ADDRESS"
  exit 1
}
echo "without COMMCHECK_MESH_ADDRESS: refused, naming the setting"
export COMMCHECK_MESH_ADDRESS="$net.0/24"
NETNS_LIMIT=1200 netns_watched "$netns_dir/certify.log" 'cases done after' "$binary" certify cpu --out "$out"
status=0
wait "$netns_pid" || status=$?
tail -n 3 "$netns_dir/certify.log"
[ "$status" -eq 0 ] || { tail -n 30 "$netns_dir/certify.log"; exit "$status"; }
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
