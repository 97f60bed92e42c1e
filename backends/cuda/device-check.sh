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
#                                         # the backend ${REPEATS:-10} times
#                                         # (COMMCHECK_REQUIRE_CUDA=1: nothing may be
#                                         # not-supported for want of a GPU; each
#                                         # run's counts in repeats.txt) and writes
#                                         # the first run's report, certifies it with
#                                         # no instruments (black-box), runs the
#                                         # precision matrix (each planted defect
#                                         # against the whole catalogue, each in a
#                                         # process of its own), then the all-reduce
#                                         # benchmark; all packed into
#                                         # $OUT/device-check.tar.gz (default
#                                         # target/cuda-device/out), at most 8 files
#                                         # come back. Check the reports in under
#                                         # reports/cuda/.
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
    cargo test --release --features cuda --test certify_cuda --test certify_cuda_black_box --test cuda_mutants \
      --no-run --message-format=json
  } | executables | sort -u | while read -r exe; do
    name=$(basename "$exe" | sed 's/-[0-9a-f]*$//')
    case "$name" in device | all_reduce | certify_cuda | certify_cuda_black_box | cuda_mutants) cp "$exe" "$dir/$name" ;; esac
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
  # certify NAME BINARY: one certification, its log and report under $work/NAME.
  work=$(mktemp -d)
  certify() {
    local name=$1 binary=$2 results
    results=$(mktemp -d)
    COMMCHECK_RESULTS_DIR="$results" timeout "${CERTIFY_TIMEOUT:-300}" "$dir/$binary" --test-threads 4 \
      >"$work/$name.log" 2>&1 || status=1
    grep -E '^(fail|timeout|crash|flaky|inconclusive): ' "$work/$name.log" | cut -c1-400 | head -n 60 || true
    grep -E '^commcheck [A-Z0-9]+: |^test result' "$work/$name.log" || tail -n 20 "$work/$name.log"
    "$dir/commcheck-report" report "$results" --out "$work/$name-report" 2>&1 | tail -n 3 || status=1
    rm -rf "$results"
  }
  echo "== certify: the kit against the CUDA backend, ${REPEATS:-10} times"
  # Four cases at a time: each world has a context of its own.
  for run in $(seq 1 "${REPEATS:-10}"); do
    echo "-- run $run"
    certify "certify-$run" certify_cuda
    printf 'run %s: %s\n' "$run" "$(grep -E '^test result' "$work/certify-$run.log" | tail -n 1)" >>"$out/repeats.txt"
  done
  cat "$out/repeats.txt"
  echo "== certify: black-box (no instruments)"
  certify black-box certify_cuda_black_box
  echo "== precision matrix: every planted defect against the whole catalogue"
  timeout "${MUTANTS_TIMEOUT:-540}" "$dir/cuda_mutants" >"$work/mutants.log" 2>&1 || status=1
  grep -E '^precision matrix: |^test result' "$work/mutants.log" || tail -n 20 "$work/mutants.log"
  grep -E '^test .* FAILED$' "$work/mutants.log" || true
  echo "== all_reduce benchmark"
  COMMCHECK_BENCH_OUT="$work/bench.md" timeout 240 "$dir/all_reduce" >"$work/bench-log.txt" 2>&1 || status=1
  tail -n 12 "$work/bench-log.txt"
  # At most 8 files come back: the logs and reports travel as one archive.
  tar -C "$work" -czf "$out/device-check.tar.gz" . || status=1
  cp "$work/certify-1-report/report.md" "$out/" 2>/dev/null || true
  echo "== device check: exit $status"
  exit "$status"
  ;;
*)
  echo "usage: $0 build|run" >&2
  exit 2
  ;;
esac
