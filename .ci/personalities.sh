#!/usr/bin/env bash
# Certifies the CPU backend in each of its personalities as a vendor harness
# with no instruments would (`certify cpu --personality NAME --no-instruments`),
# with two seeds each, and checks the verdicts: no case fails, times out,
# crashes, is flaky or inconclusive; the same verdict for every case under
# both seeds; level core for every personality; nothing lost against the
# checked-in certification of the personality (reports/personalities/NAME,
# the source of kit/EVIDENCE.md's table; remake it with
# `commcheck-report certify cpu --personality NAME --no-instruments --out
# reports/personalities/NAME`).
#
# Usage: .ci/personalities.sh [COMMCHECK_REPORT_BINARY] [SEED...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/commcheck-report}
shift || true
seeds=("$@")
[ ${#seeds[@]} -gt 0 ] || seeds=(1 2)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
for personality in lazy eager collectives-cancel unstoppable spin-wait rendezvous no-clone; do
  for seed in "${seeds[@]}"; do
    dir="$out/$personality-$seed"
    start=$(date +%s)
    # Exit status 1 (core not reached) is judged below; 2 is a usage or I/O error.
    code=0
    COMMCHECK_SEED=$seed "$bin" certify cpu --personality "$personality" --no-instruments \
      --require core --out "$dir" >"$dir.log" 2>&1 || code=$?
    if [ "$code" -gt 1 ] || [ ! -f "$dir/report.json" ]; then
      tail -n 20 "$dir.log"
      echo "$personality (seed $seed): certify exited $code"
      exit 1
    fi
    echo "$personality (seed $seed, $(($(date +%s) - start)) s): $(grep '^decided' "$dir.log")"
    # Nothing the checked-in certification (the evidence table's source)
    # passed may be lost: a lower level, or a case newly failing or
    # not-supported, fails the run.
    "$bin" diff "reports/personalities/$personality/report.json" "$dir/report.json" >"$dir.diff" 2>&1 ||
      { cat "$dir.diff"; echo "$personality (seed $seed): regressed against reports/personalities/$personality"; status=1; }
  done
  python3 - "$personality" "$out" "${seeds[@]}" <<'PY' || status=1
import json, sys
personality, out, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = {s: json.load(open(f"{out}/{personality}-{s}/report.json")) for s in seeds}
problems = []
for seed, report in runs.items():
    bad = [f"{c['name']} {c['status']}: {c.get('message') or ''}" for c in report["cases"]
           if c["status"] in ("fail", "timeout", "crash", "flaky", "inconclusive")]
    problems += [f"seed {seed}: {b}" for b in bad]
    if report["level"] != "core":
        problems.append(f"seed {seed}: level {report['level']}, expected core")
verdicts = {s: {c["name"]: c["status"] for c in r["cases"]} for s, r in runs.items()}
first = seeds[0]
for seed in seeds[1:]:
    for name, status in verdicts[first].items():
        if verdicts[seed].get(name) != status:
            problems.append(f"{name}: {status} under seed {first}, {verdicts[seed].get(name)} under seed {seed}")
if problems:
    print(f"{personality}: " + "\n  ".join(problems))
    sys.exit(1)
print(f"{personality}: level {runs[first]['level']}, the same verdicts under seeds {', '.join(seeds)}")
PY
done
exit $status
