#!/usr/bin/env bash
# Proof that the fuzzer finds bugs: the `sequence` target (or another one),
# built once, runs from an empty corpus against the CPU backend with each
# planted defect in turn (COMMCHECK_FUZZ_DEFECT), and the time to its first
# failing input is recorded.
#
#   fuzz/defects.sh [MAX_SECONDS (default 60)] [TARGET (default sequence)] [DEFECT...]
#
# Prints one Markdown row per defect: name, the defect's invariant, the SPEC
# ID the failure named, seconds to the first failure (wall clock, process
# start included) or "not found in N s", then the median over the found
# ones. FUZZ_SEED sets libFuzzer's -seed (default 1); FUZZ_SANITIZER the
# build (default none); FUZZ_SEEDS=1 starts from the committed seed inputs
# (fuzz/corpus/<target>/seed-*) instead of an empty corpus. With FUZZ_KEEP=1, each first failing input is
# minimised and stored as fuzz/regressions/<target>/defect-<Defect>-<hash>
# (+ .txt), replayed by `cargo test --test fuzz_replay`.
set -euo pipefail
cd "$(dirname "$0")"

max=${1:-60}
target=${2:-sequence}
[ $# -gt 2 ] && shift 2 || set --
sanitizer=${FUZZ_SANITIZER:-none}
seed=${FUZZ_SEED:-1}

cargo +nightly fuzz build --sanitizer "$sanitizer" "$target" >/dev/null
triple=$(rustc +nightly -vV | sed -n 's/^host: //p')
bin="target/$triple/release/$target"

if [ $# -gt 0 ]; then
  defects=("$@")
else
  # Every `Defect` variant, in SPEC order, from the backend's source.
  mapfile -t defects < <(sed -n 's/^ *\([A-Za-z0-9]*\) => "\([A-Z0-9-]*\)".*/\1 \2/p' ../backends/cpu/src/defect.rs | cut -d' ' -f1)
fi
invariant() { sed -n "s/^ *$1 => \"\([A-Z0-9-]*\)\".*/\1/p" ../backends/cpu/src/defect.rs; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
times=()
echo "| Defect | Invariant | Failure named | Time to first failure |"
echo "|---|---|---|---|"
for defect in "${defects[@]}"; do
  rm -rf "$work/corpus" "$work/artifacts"
  mkdir -p "$work/corpus" "$work/artifacts"
  if [ "${FUZZ_SEEDS:-0}" = 1 ]; then
    cp corpus/"$target"/seed-* "$work/corpus/" 2>/dev/null || true
  fi
  start=$(date +%s.%N)
  status=0
  COMMCHECK_FUZZ_DEFECT="$defect" timeout $((max + 60)) "$bin" "$work/corpus" \
    -max_total_time="$max" -seed="$seed" -timeout=30 \
    -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1 || status=$?
  end=$(date +%s.%N)
  crash=$(find "$work/artifacts" -type f | head -n 1)
  if [ "$status" -ne 0 ] && [ -n "$crash" ]; then
    seconds=$(echo "$end - $start" | bc | awk '{ printf "%.1f", $1 }')
    named=$(grep -oE "commcheck $target target: ([A-Z0-9]+-[0-9]+|\(no SPEC ID\))" "$work/log" | head -n 1 | sed 's/.*: //')
    [ -n "$named" ] || named="(crash: $(grep -m1 -oE 'panicked at [^ ]+|deadly signal|timeout' "$work/log" || echo '?'))"
    times+=("$seconds")
    echo "| $defect | $(invariant "$defect") | $named | ${seconds} s |"
    if [ "${FUZZ_KEEP:-0}" = 1 ]; then
      COMMCHECK_FUZZ_DEFECT="$defect" "$bin" "$crash" -minimize_crash=1 -max_total_time=20 -runs=500 \
        -exact_artifact_path="$work/minimised" >/dev/null 2>&1 || true
      [ -s "$work/minimised" ] || cp "$crash" "$work/minimised"
      hash=$(sha1sum "$work/minimised" | cut -c1-16)
      mkdir -p "regressions/$target"
      out="regressions/$target/defect-$defect-$hash"
      cp "$work/minimised" "$out"
      COMMCHECK_FUZZ_DECODED="$out.txt" "$bin" "$out" >/dev/null 2>&1 || true
      rm -f "$work/minimised"
    fi
  else
    echo "| $defect | $(invariant "$defect") | — | not found in ${max} s |"
  fi
done
if [ ${#times[@]} -gt 0 ]; then
  median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f", (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  echo
  from="an empty corpus"
  [ "${FUZZ_SEEDS:-0}" = 1 ] && from="the seed corpus"
  echo "found ${#times[@]} of ${#defects[@]} defects; median time to first failure: ${median} s (max ${max} s each, from $from, seed $seed)"
fi
