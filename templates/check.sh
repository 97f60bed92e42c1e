#!/usr/bin/env bash
# The template test. Copies templates/backend out of the checkout, as a vendor
# would, with its .cargo/config.toml pointing commcheck at this checkout, and
# runs the vendor's documented path on it (its stand-in backend is the CPU
# reference backend, so the template cannot rot):
#   1. the README's blocks marked "check.sh runs this block", verbatim, with
#      a commcheck-report built without the bundled backends on PATH: they
#      leave a signed certification (report.json, its signature, junit.xml,
#      summary.md, report.svg) and the certified/ baseline the workflow needs;
#   2. `cargo test` ends with its closing summary (level, reasons, grid);
#   3. `git add -A --dry-run` lists no key and no build output;
#   4. `cargo test` and `cargo nextest run --profile ci` (JUnit) give the same
#      pass and skipped counts, and `commcheck-report report` gives the same
#      report (equal digests) from either run's records, with those counts;
#   5. `verify --key` rejects the signed report once edited;
#   6. the template's fuzz target (fuzz/, the suite's harness compiled in)
#      runs from its seed corpus;
#   7. a test file without `harness = false` fails, saying what to add.
# Needs cargo-nextest 0.9.143 or later (JUnit `report-skipped`), and
# cargo-fuzz with a nightly toolchain.
# Exit status: 0 passed; 1 a check failed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The workspace's target folder (or the caller's CARGO_TARGET_DIR): the
# template builds with the versions the workspace locks (below), so the
# crates both build alike are compiled once.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export CARGO_TERM_COLOR=never
export COMMCHECK_SEED=20261203
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
crate="$work/my-backend"

step() { echo "== template: $* (at ${SECONDS} s)"; }
fail() {
  echo "template check FAILED: $*" >&2
  exit 1
}
count() { # count REGEX FILE: the first number the regex's group 1 captures
  sed -nE "s/$1/\\1/p" "$2" | sed -n 1p
}

cp -r "$root/templates/backend" "$crate"
rm -rf "$crate/target" "$crate/Cargo.lock" "$crate/fuzz/Cargo.lock"
# The versions the workspace locks (cargo adds the crate's own entries and
# drops the rest): a new release upstream does not change what this check
# builds, and the dependencies the workspace built are reused.
cp "$root/Cargo.lock" "$crate/Cargo.lock"
# commcheck-report (and so commcheck's own fuzz package) has memchr with its
# default features, through its JUnit writer; the template has it without.
# The cfg differs, and with it memchr and every crate above it (eredu, the
# kit): built again for the template. The copy asks for memchr's defaults
# (no code changes), so its builds reuse those crates.
memchr_defaults() { printf '\n[%s.memchr]\nversion = "2"\n' "$2" >>"$1"; }
memchr_defaults "$crate/Cargo.toml" dev-dependencies
# One place says where commcheck comes from: point it at this checkout.
sed -i "s|path = \"../../|path = \"$root/|" "$crate/.cargo/config.toml"
grep -q "path = \"$root/kit\"" "$crate/.cargo/config.toml" || fail "the template's .cargo/config.toml does not patch commcheck to ../../kit"
# The crate's target/ is the shared target (dependencies built once). Its
# CACHEDIR.TAG marks it as cargo's target directory: the suite puts its
# records in target/commcheck/ of the nearest one above its binary.
mkdir -p "$CARGO_TARGET_DIR"
[ -f "$CARGO_TARGET_DIR/CACHEDIR.TAG" ] ||
  echo "Signature: 8a477f597d28d172789f06886806bc55" >"$CARGO_TARGET_DIR/CACHEDIR.TAG"
ln -s "$CARGO_TARGET_DIR" "$crate/target"

step "commcheck-report without the bundled backends (default-features = false)"
# The build puts it at target/debug/commcheck-report, where the workspace's
# own build (with its features) may be: that one is put back afterwards.
built="$CARGO_TARGET_DIR/debug/commcheck-report"
mkdir -p "$work/bin"
[ ! -f "$built" ] || cp -p "$built" "$work/workspace-commcheck-report"
cargo build --quiet --manifest-path "$root/reports/Cargo.toml" --no-default-features --bin commcheck-report
# The README's commands call it by name, as installed.
report_tool="$work/bin/commcheck-report"
cp "$built" "$report_tool"
# cargo hard-links $built to the build's own copy in deps/: unlink it
# first, or writing the workspace's binary back would overwrite that copy
# (and a later run of this check would get the workspace's binary).
if [ -f "$work/workspace-commcheck-report" ]; then
  rm -f "$built"
  cp -p "$work/workspace-commcheck-report" "$built"
fi
if "$report_tool" certify cpu --out "$work/nothing" >/dev/null 2>&1; then
  fail "a build without the cpu feature certified the bundled CPU backend"
fi
export PATH="$work/bin:$PATH"
rm -rf "$CARGO_TARGET_DIR/commcheck/minimal" "$CARGO_TARGET_DIR/nextest"

# The README's blocks marked "check.sh runs this block", verbatim, one
# command at a time in the crate's folder. After each run of the suite, its
# records are kept aside, to compare the runners below.
step "the README's commands, verbatim"
python3 - "$crate/README.md" >"$work/readme-commands" <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines()
marked = False
inside = False
for line in lines:
    if line.strip() == "<!-- check.sh runs this block -->":
        marked = True
    elif marked and line.startswith("```") and not inside:
        inside = True
    elif inside and line.startswith("```"):
        inside = marked = False
    elif inside and line.strip():
        print(line)
PY
[ "$(wc -l <"$work/readme-commands")" -ge 8 ] || fail "the README has fewer runnable commands than expected"
n=0
while IFS= read -r command; do
  n=$((n + 1))
  echo "\$ $command"
  (cd "$crate" && bash -c "$command") >"$work/readme-$n.log" 2>&1 ||
    { tail -n 40 "$work/readme-$n.log"; fail "the README's command failed: $command"; }
  case "$command" in
    "cargo test --test commcheck"*)
      cp "$work/readme-$n.log" "$work/test.log"
      cp -r "$CARGO_TARGET_DIR/commcheck/minimal" "$work/records-test" ;;
    "cargo nextest run"*)
      cp "$work/readme-$n.log" "$work/nextest.log"
      cp -r "$CARGO_TARGET_DIR/commcheck/minimal" "$work/records-nextest" ;;
  esac
done <"$work/readme-commands"
[ -f "$work/test.log" ] && [ -f "$work/nextest.log" ] || fail "the README runs no cargo test or no nextest"
for file in report.json report.json.minisig junit.xml summary.md report.svg; do
  [ -f "$crate/certification/$file" ] || fail "the README's commands left no certification/$file"
done
[ -f "$crate/certified/report.json" ] && [ -f "$crate/certified/release.pub" ] ||
  fail "the README's commands do not make certified/report.json and certified/release.pub (the workflow needs them)"

step "cargo test's closing summary"
for said in "commcheck level: core" "commcheck: full is blocked by" "commcheck not-supported, by reason" \
  "commcheck grid (invariant x subject)"; do
  grep -qF "$said" "$work/test.log" || { tail -n 60 "$work/test.log"; fail "cargo test did not print \"$said\""; }
done
awk '/^commcheck level:/ { shown = 1 } shown && printed++ < 12' "$work/test.log"

step "git add -A --dry-run: no key, no build output"
(cd "$crate" && git init -q && git add -A --dry-run) >"$work/git-add.log"
if grep -E "\.key'|'(.*/)?target(/|')|'certification/" "$work/git-add.log"; then
  fail "git would add the files above (.gitignore)"
fi
echo "git would add $(wc -l <"$work/git-add.log") files, no key and no build output"

step "the runners agree: cargo test, nextest (JUnit) and a report from each run's records"
test_passed=$(count '^test result: ok\. ([0-9]+) passed.*' "$work/test.log")
test_ignored=$(count '^test result: .* ([0-9]+) ignored.*' "$work/test.log")
nextest_passed=$(count '.*tests? run: ([0-9]+) passed.*' "$work/nextest.log")
nextest_skipped=$(count '.*tests? run: .* ([0-9]+) skipped.*' "$work/nextest.log")
junit="$crate/target/nextest/ci/junit.xml"
[ -f "$junit" ] || fail "nextest wrote no JUnit file at $junit"
read -r junit_tests junit_skipped junit_failures < <(python3 - "$junit" <<'PY'
import sys, xml.etree.ElementTree as ET
cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
skipped = sum(1 for c in cases if c.find("skipped") is not None)
failed = sum(1 for c in cases if c.find("failure") is not None or c.find("error") is not None)
print(len(cases), skipped, failed)
PY
)
junit_passed=$((junit_tests - junit_skipped - junit_failures))
"$report_tool" report "$work/records-test" --out "$work/cert-test" --require core >"$work/report-test.log" ||
  { cat "$work/report-test.log"; fail "report from cargo test's records"; }
"$report_tool" report "$work/records-nextest" --out "$work/cert-nextest" --require core \
  >"$work/report-nextest.log" || { cat "$work/report-nextest.log"; fail "report from nextest's records"; }
read -r digest_test pass_test skipped_test level_test < <(python3 - "$work/cert-test/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["digest"], sum(c["status"] == "pass" for c in r["cases"]),
      sum(c["status"] == "not-supported" for c in r["cases"]), r["level"])
PY
)
read -r digest_nextest pass_nextest skipped_nextest _ < <(python3 - "$work/cert-nextest/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["digest"], sum(c["status"] == "pass" for c in r["cases"]),
      sum(c["status"] == "not-supported" for c in r["cases"]), r["level"])
PY
)
echo "cargo test:  $test_passed passed, $test_ignored ignored"
echo "nextest:     $nextest_passed passed, $nextest_skipped skipped; JUnit: $junit_passed passed, $junit_skipped <skipped>, $junit_failures failed"
echo "report:      $pass_test pass, $skipped_test not-supported, level $level_test (from cargo test) = $pass_nextest pass, $skipped_nextest not-supported (from nextest)"
for pair in "$test_passed:$nextest_passed" "$test_passed:$junit_passed" "$test_passed:$pass_test" "$test_passed:$pass_nextest" \
  "$test_ignored:$nextest_skipped" "$test_ignored:$junit_skipped" "$test_ignored:$skipped_test" "$test_ignored:$skipped_nextest"; do
  [ "${pair%%:*}" = "${pair##*:}" ] || fail "the runners disagree (see the counts above)"
done
[ "$junit_failures" = 0 ] || fail "JUnit has failures"
[ "$digest_test" = "$digest_nextest" ] || fail "the two reports differ: $digest_test vs $digest_nextest"
echo "equal reports: $digest_test"
"$report_tool" diff "$work/cert-test/report.json" "$work/cert-nextest/report.json" >/dev/null ||
  fail "diff found a regression between two equal runs"

step "verify --key rejects an edited report (the README signed certification/)"
cp "$crate/certification/report.json" "$crate/certification/report.json.minisig" "$work/"
sed -i '0,/"pass"/s//"fail"/' "$work/report.json"
if "$report_tool" verify "$work/report.json" --key "$crate/release.pub" >"$work/edited.log" 2>&1; then
  fail "verify --key accepted an edited report"
fi
echo "an edited report is rejected: $(head -n 2 "$work/edited.log" | tr '\n' ' ')"

step "the fuzz target, on the suite's own harness (cargo +nightly fuzz, 10 s)"
cargo +nightly fuzz --version >/dev/null 2>&1 || fail "cargo-fuzz on a nightly toolchain is needed (.ci/run installs it)"
# A copy of the template's seed corpus (the checkout's stays as committed).
ls "$crate/fuzz/corpus/sequence/"* >/dev/null 2>&1 || fail "the template's fuzz target has no seed corpus"
cp -r "$crate/fuzz/corpus/sequence" "$work/fuzz-corpus"
# The repository's fuzz packages share one target folder: the template's fuzz package
# starts from the versions commcheck's own fuzz package locks (cargo adds the crate's
# entries), so the dependencies both build with the same features are built once, and a
# new release upstream does not change what this check builds. Unoptimised (--dev), as
# .ci/run's fuzz smoke builds them: a 10 s smoke, and the shared build is reused.
cp "$root/fuzz/Cargo.lock" "$crate/fuzz/Cargo.lock"
# memchr's defaults, as for the crate above.
memchr_defaults "$crate/fuzz/Cargo.toml" dependencies
# From fuzz/, as the template's README says: its .cargo/config.toml keeps
# coverage to the backend (fuzz/coverage-scope.sh).
(cd "$crate/fuzz" && env -u CARGO_TARGET_DIR cargo +nightly fuzz run --dev --sanitizer none --target-dir "$root/fuzz/target" \
  sequence "$work/fuzz-corpus" -- -max_total_time=10 -seed=1 -print_final_stats=1 -artifact_prefix="$work/") \
  >"$work/fuzz.log" 2>&1 || { tail -n 40 "$work/fuzz.log"; fail "the template's fuzz target failed"; }
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
[ "${runs:-0}" -gt 0 ] || { tail -n 20 "$work/fuzz.log"; fail "the template's fuzz target ran no input"; }
echo "fuzz target: $runs inputs, no failure"

step "a test file without harness = false"
sed -i '/^harness = false$/d' "$crate/Cargo.toml"
if (cd "$crate" && cargo test --test commcheck) >"$work/harness.log" 2>&1; then
  fail "cargo test passed without harness = false"
fi
grep -q 'add `harness = false`' "$work/harness.log" ||
  { tail -n 20 "$work/harness.log"; fail "the failure does not say to add harness = false"; }
echo "without harness = false: $(grep -m1 'was built with libtest' "$work/harness.log")"
echo "template check passed (${SECONDS} s)"
