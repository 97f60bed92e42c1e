#!/usr/bin/env bash
# The CUDA backend's device check, in two halves, so that the GPU machine
# only runs what was built here:
#
#   backends/cuda/device-check.sh build   # here: release binaries (the device
#                                         # tests, the certification, commcheck-report,
#                                         # the benchmark) into target/cuda-device
#   backends/cuda/device-check.sh run     # there (the `device` tool, carrying
#                                         # target/cuda-device): prints the driver,
#                                         # `ldd --version` and the CUDA libraries
#                                         # found, runs the device tests, certifies
#                                         # the backend (COMMCHECK_REQUIRE_CUDA=1:
#                                         # nothing may be not-supported for want of
#                                         # a GPU) and writes its report, proves
#                                         # every planted defect is caught, then the
#                                         # all-reduce benchmark; all into $OUT
#                                         # (default target/cuda-device/out). Check
#                                         # the report in under reports/cuda/.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=target/cuda-device

executables() {
  python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable"):
        print(message["executable"])'
}

case "${1:-}" in
build)
  rm -rf "$dir"
  mkdir -p "$dir"
  {
    cargo test -p commcheck-cuda --release --no-run --message-format=json
    cargo bench -p commcheck-cuda --no-run --message-format=json
    cargo test --release --features cuda --test certify_cuda --test cuda_mutants --no-run --message-format=json
  } | executables | sort -u | while read -r exe; do
    name=$(basename "$exe" | sed 's/-[0-9a-f]*$//')
    case "$name" in device | all_reduce | certify_cuda | cuda_mutants) cp "$exe" "$dir/$name" ;; esac
  done
  cargo build --release -p commcheck-report --no-default-features --quiet
  cp target/release/commcheck-report "$dir/"
  strip "$dir"/*
  ls -l "$dir"
  du -sh "$dir"
  ;;
run)
  out=${OUT:-$dir/out}
  mkdir -p "$out"
  {
    echo "== driver"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "nvidia-smi: not found"
    echo "== ldd --version"
    ldd --version 2>&1 | sed -n 1p
    echo "== CUDA libraries the loader finds"
    ldconfig -p | grep -E 'libcuda\.so|libnvrtc' || echo "(neither libcuda nor libnvrtc in the ldconfig cache)"
  } 2>&1 | tee "$out/environment.txt"
  # Streams share hardware queues (8 by default): a held stream must not
  # hold another's work. Kernels are loaded eagerly.
  export CUDA_DEVICE_MAX_CONNECTIONS=32 CUDA_MODULE_LOADING=EAGER COMMCHECK_REQUIRE_CUDA=1
  status=0
  echo "== device tests"
  timeout 240 "$dir/device" 2>&1 | tee "$out/device-tests.txt" || status=1
  echo "== certify: the kit against the CUDA backend"
  # Four cases at a time: each world has a context of its own.
  # The per-case records stay out of $OUT: the device tool brings back a
  # limited number of files, and the report is what matters.
  results=$(mktemp -d)
  COMMCHECK_RESULTS_DIR="$results" timeout "${CERTIFY_TIMEOUT:-300}" "$dir/certify_cuda" --test-threads 4 \
    >"$out/certify.log" 2>&1 || status=1
  grep -E '^(fail|timeout|crash|flaky|inconclusive): ' "$out/certify.log" | cut -c1-400 | head -n 60 || true
  grep -E '^commcheck [A-Z0-9]+: |^test result' "$out/certify.log" || tail -n 20 "$out/certify.log"
  "$dir/commcheck-report" report "$results" --out "$out/report" 2>&1 | tail -n 5 || status=1
  echo "== mutants: every planted defect fails its own invariant's check"
  timeout "${MUTANTS_TIMEOUT:-400}" "$dir/cuda_mutants" >"$out/mutants.log" 2>&1 || status=1
  grep -E '^test |^test result' "$out/mutants.log" || tail -n 20 "$out/mutants.log"
  echo "== all_reduce benchmark"
  COMMCHECK_BENCH_OUT="$out/bench.md" timeout 240 "$dir/all_reduce" 2>&1 | tee "$out/bench-log.txt" || status=1
  echo "== device check: exit $status"
  exit "$status"
  ;;
*)
  echo "usage: $0 build|run" >&2
  exit 2
  ;;
esac
