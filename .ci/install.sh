# What .ci/run and .ci/nightly need besides the Rust toolchain (sourced):
# Open MPI, libclang and minisign from Debian, cargo-nextest, a nightly
# toolchain with cargo-fuzz; each installed only where missing.
rustup component add rustfmt clippy >/dev/null 2>&1 || true

# Open MPI (process-per-rank worlds), libclang (the `mpi` crate's bindgen) and
# minisign (the reference tool checks commcheck-report's signatures).
if ! command -v mpirun >/dev/null || ! command -v minisign >/dev/null ||
  ! dpkg -s libopenmpi-dev libclang-dev >/dev/null 2>&1; then
  step "installing Open MPI, libclang and minisign"
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openmpi-bin libopenmpi-dev libclang-dev minisign >/dev/null
fi
# cargo-nextest 0.9.143 or later (JUnit `report-skipped`), for the template test.
nextest_ok() {
  local version
  version=$(cargo nextest --version 2>/dev/null | sed -nE 's/^cargo-nextest 0\.9\.([0-9]+).*/\1/p')
  [ -n "$version" ] && [ "$version" -ge 143 ]
}
if ! nextest_ok; then
  step "installing cargo-nextest"
  # Without self-update (fewer crates to build); nothing else is lost.
  cargo install --locked cargo-nextest --no-default-features --features default-no-update >/dev/null
fi
# cargo-fuzz and a nightly toolchain, for the fuzz smoke and the template's target.
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  step "installing cargo-fuzz"
  cargo install --locked cargo-fuzz >/dev/null
fi
# Open MPI refuses to run as root without these; harmless otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

