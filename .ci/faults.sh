#!/usr/bin/env bash
# Faults of the network itself, across two stand-in hosts (.ci/netns.sh):
# the certification of the CPU reference backend under
#   slow-link    added latency on host cc-h1's link (netem delay 20ms; where the
#                kernel has no netem, a 4 Mbit/s token bucket, said so): it must
#                still reach full;
#   link-down    host cc-h1's link taken down during a case: the run must stop
#                with a timeout naming rank 1 and its address;
#   killed-rank  rank 1's process killed (SIGKILL) during a case: the run must
#                stop with a crash naming rank 1 and its address.
# For the last two the report must be marked incomplete, and no commcheck
# process may be left on any host. Verdicts and leftovers are asserted, never
# the time taken (each launch is bounded only so that a hang ends the script).
#
#   .ci/faults.sh REPORT_BINARY OUT [SCENARIO...]   # needs root
set -euo pipefail
. "$(dirname "$0")/netns.sh"
binary=$(realpath "$1") out=$2
shift 2
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(slow-link link-down killed-rank)
netns_permitted
trap netns_cleanup EXIT
export COMMCHECK_MESH_ADDRESS="$net.0/24"
name=$(basename "$binary" | cut -c1-15)
failed=0
problem() { echo "faults.sh: $scenario: $*"; failed=1; }

for scenario in "${scenarios[@]}"; do
  expect=""
  netns_hosts 2
  dir="$out/$scenario"
  rm -rf "$dir" && mkdir -p "$dir"
  case $scenario in
    slow-link)
      unset COMMCHECK_CASE_TIMEOUT_MS COMMCHECK_GRACE_MS
      if ip netns exec cc-h1 tc qdisc add dev cc-v1 root netem delay 20ms 2>/dev/null; then
        echo "slow-link: netem delay 20ms on cc-h1's link"
      else
        ip netns exec cc-h1 tc qdisc add dev cc-v1 root tbf rate 4mbit burst 1mbit latency 500ms
        echo "slow-link: this kernel has no netem: a 4 Mbit/s token bucket on cc-h1's link instead (slower than a 4 MB tensor in 5 s)"
      fi
      expect="level full"
      NETNS_LIMIT=1800 netns_watched "$dir/log" 'cases done after' "$binary" certify cpu --out "$dir/report" \
        || problem "no case finished in three launches"
      wait "$netns_pid" || problem "the launch failed: $(tail -n 5 "$dir/log")"
      grep -q "$expect" "$dir/log" || problem "did not reach full: $(grep -m3 'level' "$dir/log")"
      ;;
    link-down | killed-rank)
      export COMMCHECK_CASE_TIMEOUT_MS=1000 COMMCHECK_GRACE_MS=1000
      if ! NETNS_LIMIT=600 netns_watched "$dir/log" 'cases done after' "$binary" certify cpu --out "$dir/report"; then
        problem "no case finished in three launches"
      elif [ "$scenario" = link-down ]; then
        ip -n cc-h1 link set cc-v1 down
        expect="rank 1: at $net\.2:[0-9]+: its process sent nothing"
      else
        netns_named cc-h1 "$name" | xargs -r kill -KILL
        expect="rank 1 crashed: its process \(at $net\.2:[0-9]+\) died mid-case"
      fi
      # Every commcheck process must end by itself: a rank cut off by the
      # link gives its leader up after the world's ceiling, the grace and a
      # watchdog. Bounded at 5 minutes, which only a hang reaches.
      tries=0
      while [ -n "$(netns_leftovers "$name")" ] && [ "$tries" -lt 600 ]; do
        tries=$((tries + 1))
        sleep 0.5
      done
      left=$(netns_leftovers "$name")
      [ -z "$left" ] || problem "commcheck processes still running 5 minutes after the fault: $left"
      # mpirun's own teardown across a downed link is Open MPI's business:
      # give it 10 s after the ranks ended, then end it.
      tries=0
      while kill -0 "$netns_pid" 2>/dev/null && [ "$tries" -lt 20 ]; do
        tries=$((tries + 1))
        sleep 0.5
      done
      if kill -0 "$netns_pid" 2>/dev/null; then
        echo "$scenario: note: mpirun had not ended 10 s later (Open MPI's teardown across the fault); ended here"
        pkill -KILL -P "$netns_pid" 2>/dev/null || true
        for i in 0 1; do netns_named "cc-h$i" mpirun | xargs -r kill -KILL; netns_named "cc-h$i" orted | xargs -r kill -KILL; done
      fi
      wait "$netns_pid" 2>/dev/null || true
      grep -Eq "$expect" "$dir/log" "$dir/report/report.json" 2>/dev/null || problem "the output does not say /$expect/: $(grep -m5 'rank 1\|stopping' "$dir/log")"
      python3 - "$dir/report/report.json" <<'PY' || problem "the report is not marked incomplete"
import json, sys
report = json.load(open(sys.argv[1]))
why = report["provenance"].get("incomplete")
assert why and report["level"] == "none", (report["level"], why)
print(f"report: level none, incomplete: {why}")
PY
      ;;
    *) echo "faults.sh: unknown scenario $scenario"; exit 2 ;;
  esac
  [ "$failed" -ne 0 ] || echo "$scenario: as expected: $(grep -Eo "$expect" "$dir/log" | head -n 1)"
  netns_cleanup
done
exit "$failed"
