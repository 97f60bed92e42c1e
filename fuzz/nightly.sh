#!/usr/bin/env bash
# Nightly fuzzing of commcheck's targets, for vendors and for this project.
#
#   fuzz/nightly.sh [SECONDS_PER_TARGET] [TARGET...]
#
# For every target (all of `cargo fuzz list` by default): a time-boxed run on
# fuzz/corpus/<target> (restarted after each crash until the time is spent),
# then `cargo fuzz cmin` of the corpus, then `cargo fuzz tmin` of each new
# crash. Each minimised crash is copied to fuzz/regressions/<target>/ with its
# decoded form beside it (<name>.txt), where `cargo test` replays it. Ends
# with a summary: exec/s, coverage, new corpus inputs and crashes per target.
#
# Environment:
#   COMMCHECK_FUZZ_DEFECT  a planted defect of the CPU backend (commcheck_cpu::Defect
#                          name): the run must find it; regressions are then
#                          named defect-<Defect>-<hash> (replayed on that defect too)
#   FUZZ_SANITIZER         cargo fuzz --sanitizer (default: none; the targets are safe Rust)
#   FUZZ_MAX_CRASHES       stop restarting a target after this many crashes (default 10)
#   FUZZ_TIMEOUT           libFuzzer -timeout per input, seconds (default 30)
#
# A vendor copies fuzz/ beside their harness crate, replaces the CPU harness
# in fuzz_targets/common.rs with theirs, and runs this script.
set -euo pipefail
cd "$(dirname "$0")"

secs=${1:-600}
[ $# -gt 0 ] && shift
sanitizer=${FUZZ_SANITIZER:-none}
max_crashes=${FUZZ_MAX_CRASHES:-10}
timeout=${FUZZ_TIMEOUT:-30}
defect=${COMMCHECK_FUZZ_DEFECT:-}

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal

fuzz() { cargo +nightly fuzz "$@"; }
flags=(--sanitizer "$sanitizer")

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(fuzz list)
fi

echo "== building ${targets[*]} (sanitizer: $sanitizer)"
for target in "${targets[@]}"; do
  fuzz build "${flags[@]}" "$target"
done
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin="target/$triple/release"

mkdir -p logs
summary=()
for target in "${targets[@]}"; do
  corpus="corpus/$target" artifacts="artifacts/$target" regressions="regressions/$target"
  mkdir -p "$corpus" "$artifacts" "$regressions"
  before=$(find "$corpus" -type f | wc -l)
  known=$(mktemp)
  find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort >"$known"
  log="logs/$target.log"
  : >"$log"

  echo "== $target: fuzzing for ${secs}s"
  start=$(date +%s) runs=0 execs=0 crashes=0
  while :; do
    left=$((secs - ($(date +%s) - start)))
    [ "$left" -gt 0 ] || break
    runs=$((runs + 1))
    status=0
    fuzz run "${flags[@]}" "$target" "$corpus" -- \
      -max_total_time="$left" -timeout="$timeout" -print_final_stats=1 \
      >>"$log" 2>&1 || status=$?
    [ "$status" -eq 0 ] && break
    crashes=$((crashes + 1))
    [ "$crashes" -lt "$max_crashes" ] || break
  done
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{ s += $1 } END { print s + 0 }')
  elapsed=$(($(date +%s) - start))
  [ "$elapsed" -gt 0 ] || elapsed=1
  coverage=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -n 1 || true)

  echo "== $target: cmin"
  fuzz cmin "${flags[@]}" "$target" "$corpus" >>"$log" 2>&1 || echo "   (cmin failed, see $log)"
  after=$(find "$corpus" -type f | wc -l)

  new_crashes=0
  while IFS= read -r crash; do
    grep -qxF "$crash" "$known" && continue
    new_crashes=$((new_crashes + 1))
    echo "== $target: tmin $crash"
    fuzz tmin "${flags[@]}" "$target" "$crash" >>"$log" 2>&1 || true
    minimised=$(ls -t "$artifacts"/minimized-from-* 2>/dev/null | head -n 1 || true)
    [ -n "$minimised" ] || minimised=$crash
    hash=$(sha1sum "$minimised" | cut -c1-16)
    name="crash-$hash"
    [ -n "$defect" ] && name="defect-$defect-$hash"
    cp "$minimised" "$regressions/$name"
    COMMCHECK_FUZZ_DECODED="$regressions/$name.txt" "$bin/$target" "$regressions/$name" >/dev/null 2>&1 || true
    echo "   -> $regressions/$name (+ .txt)"
  done < <(find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \) | sort)
  rm -f "$known"

  summary+=("$(printf '%-10s %8s exec/s  %-22s %+5d corpus inputs (%d -> %d)  %d new crash(es)  %d run(s)' \
    "$target" "$((execs / elapsed))" "${coverage:-cov: ?}" "$((after - before))" "$before" "$after" "$new_crashes" "$runs")")
done

echo
echo "== summary (${secs}s per target${defect:+, defect $defect})"
printf '%s\n' "${summary[@]}"
echo "logs: fuzz/logs/<target>.log; regressions: fuzz/regressions/<target>/ (replayed by cargo test --test fuzz_replay)"
