#!/usr/bin/env bash
# rustc wrapper for fuzz builds (named in .cargo/config.toml beside it):
# coverage is the code under test's. cargo-fuzz instruments every crate for
# libFuzzer (`-Cpasses=sancov-module` and its `-sanitizer-coverage-*` options
# in RUSTFLAGS); this builds the crates that check the backend, rather than
# make it up, without that instrumentation: the ones named in
# COMMCHECK_FUZZ_UNINSTRUMENTED (crate names, space-separated; the config's
# [env] sets it), such as the kit (`commcheck`) and the targets themselves,
# where the harness and the kit's generic code are compiled. The backend and
# its runtime keep it.
#
# Why: libFuzzer pays for every coverage feature an input hits (entropic
# scheduling keeps a frequency per rare feature), and the kit's own edges are
# most of a target's counters, so without this most of libFuzzer's time per
# input goes to the kit's bookkeeping, and the kit's branches steer the search
# as much as the backend's (commcheck's fuzz/README.md, "Coverage").
#
# cargo runs it as `coverage-scope.sh RUSTC ARGS...`; any other crate, and any
# build without sancov, runs RUSTC ARGS... unchanged.
set -euo pipefail
if [ -z "${COMMCHECK_FUZZ_UNINSTRUMENTED:-}" ]; then
  echo "coverage-scope.sh: COMMCHECK_FUZZ_UNINSTRUMENTED is not set (the [env] of .cargo/config.toml names the crates to build without coverage)" >&2
  exit 2
fi
rustc=$1
shift
crate=
previous=
for arg in "$@"; do
  [ "$previous" = --crate-name ] && crate=$arg
  previous=$arg
done
case " $COMMCHECK_FUZZ_UNINSTRUMENTED " in
  *" $crate "*) ;;
  *) exec "$rustc" "$@" ;;
esac
args=()
for arg in "$@"; do
  case "$arg" in
    -Cpasses=sancov-module | -Cllvm-args=-sanitizer-coverage-*) ;;
    *) args+=("$arg") ;;
  esac
done
exec "$rustc" "${args[@]}"
