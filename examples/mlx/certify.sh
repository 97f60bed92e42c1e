#!/usr/bin/env bash
# Certifies the upstream MLX backend of eredu (crates.io eredu-backend-mlx
# 0.5.0, on MLX's CPU device) with commcheck, and writes reports/mlx/.
#
#   examples/mlx/certify.sh            # from anywhere in the checkout
#
# 1. installs what the build needs (Debian/Ubuntu: apt-get; Rust via rustup
#    when cargo is missing);
# 2. builds examples/mlx in debug (MLX builds from C++ source through
#    safemlx-sys: several minutes and a few GB the first time) and
#    commcheck-report in the main workspace;
# 3. runs the certification in one process (worlds of one rank) and under
#    `mpirun -n $RANKS` (one rank per process over MLX's ring backend; worlds
#    of $RANKS ranks, and of one rank on process 0), each through
#    commcheck-mlx-drive: every case that runs gets fresh processes (a hung
#    MLX call keeps MLX's process-wide runtime lock, an unmatched collective
#    stays on the ring; see src/drive.rs);
# 4. merges the two result files into reports/mlx/{report.json,junit.xml,
#    summary.md} (the raw result files are kept next to them);
# 5. runs `commcheck-report verify` on the report.
#
# Exit status: 0 the report verifies and reaches level core; 1 it verifies
# but does not reach core (expected for MLX 0.5.0: see FINDINGS.md); 2 a
# step failed (install, build, a run that wrote no results, merge, verify).

set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/reports/mlx"
ranks="${RANKS:-2}"
results="$here/target/commcheck"

say() { printf '\n== %s\n' "$*"; }
die() { printf 'certify.sh: %s\n' "$*" >&2; exit 2; }

# -- 1. Install ---------------------------------------------------------------
say "installing build dependencies"
packages=(build-essential cmake pkg-config curl ca-certificates git
  libopenblas-dev liblapacke-dev openmpi-bin libopenmpi-dev libclang-dev clang)
if command -v apt-get >/dev/null 2>&1; then
  missing=()
  for package in "${packages[@]}"; do
    dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends \
      "${missing[@]}" || die "apt-get install ${missing[*]} failed"
  else
    echo "all of ${packages[*]} are installed"
  fi
else
  echo "no apt-get: install ${packages[*]} (or your system's equivalents) yourself"
fi
if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || {
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal \
      || die "could not install Rust with rustup"
  }
  export PATH="$HOME/.cargo/bin:$PATH"
fi
# Open MPI refuses to run as root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# -- 2. Build -----------------------------------------------------------------
say "building examples/mlx (debug; MLX from C++ source)"
(cd "$here" && cargo build --tests --bins) || die "cargo build in examples/mlx failed"
say "building commcheck-report (main workspace)"
(cd "$root" && cargo build -p commcheck-report) || die "cargo build -p commcheck-report failed"

# -- 3. Certify ---------------------------------------------------------------
mkdir -p "$results" "$out"
single="$results/one-process.json"
across="$results/mpirun-$ranks.json"
rm -f "$single" "$across"

# The test binary of test target $1 (built above).
test_binary() {
  (cd "$here" && cargo test --no-run --message-format=json --test "$1" 2>/dev/null) \
    | grep "\"name\":\"$1\"" | grep '"executable":"' \
    | sed -E 's/.*"executable":"([^"]+)".*/\1/' | tail -n 1
}
certify_bin="$(test_binary certify)"
processes_bin="$(test_binary certify_processes)"
[ -x "$certify_bin" ] || die "no test binary for tests/certify.rs"
[ -x "$processes_bin" ] || die "no test binary for tests/certify_processes.rs"
drive="${CARGO_TARGET_DIR:-$here/target}/debug/commcheck-mlx-drive"

say "certifying in one process (worlds of 1 rank)"
"$drive" --binary "$certify_bin" --results "$single"
echo "one-process certification exited with status $?"
[ -s "$single" ] || die "the one-process run wrote no result file ($single)"

say "certifying under mpirun -n $ranks (one rank per process)"
"$drive" --binary "$processes_bin" --mpirun "$ranks" --results "$across"
echo "mpirun certification exited with status $?"
[ -s "$across" ] || die "the mpirun run wrote no result file ($across)"

cp "$single" "$out/results-one-process.json"
cp "$across" "$out/results-mpirun-$ranks.json"

# -- 4. Merge and write the report --------------------------------------------
say "merging the runs and writing $out"
(cd "$here" && cargo run --quiet --bin commcheck-mlx-report -- --out "$out" \
  "one-process=$single" "mpirun-$ranks=$across")
level_status=$?
[ "$level_status" -le 1 ] || die "commcheck-mlx-report failed (status $level_status)"

# -- 5. Verify ----------------------------------------------------------------
say "verifying $out/report.json"
(cd "$root" && cargo run --quiet -p commcheck-report -- verify "$out/report.json") \
  || die "the report does not verify"

if [ "$level_status" -ne 0 ]; then
  echo "certify.sh: level core not reached (see $out/summary.md and $out/FINDINGS.md)" >&2
fi
exit "$level_status"
