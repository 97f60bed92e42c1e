#!/usr/bin/env bash
# Certifies the CPU reference backend with one rank per process and checks
# the report: every M-class case passed, and the multi-rank ones ran across
# the processes.
#
#   .ci/processes.sh REPORT_BINARY RANKS OUT
set -euo pipefail
binary=$1 ranks=$2 out=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -n "$ranks" "$binary" certify cpu --out "$out" | tail -n 3
"$binary" verify "$out/report.json"
python3 - "$out/report.json" "$ranks" <<'PY'
import json, sys
report, ranks = json.load(open(sys.argv[1])), int(sys.argv[2])
assert report["provenance"].get("processes") == ranks, "the report does not say it ran across processes"
m = [c for c in report["cases"] if c["class"] == "M"]
across = [c for c in m if max(c["worlds"], default=0) >= 2]
single = [c["name"] for c in m if max(c["worlds"], default=0) < 2]
assert all(c["status"] == "pass" for c in m), "an M-class case did not pass"
print(f"{len(across)} M-class cases ran across processes (largest world {max(max(c['worlds']) for c in across)}); "
    f"{len(single)} M-class cases on local subjects use one rank: {', '.join(single)}")
PY
