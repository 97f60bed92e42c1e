#!/usr/bin/env bash
# rustc wrapper for the fuzz builds (fuzz/.cargo/config.toml): coverage is the
# code under test's. cargo-fuzz instruments every crate for libFuzzer
# (`-Cpasses=sancov-module` and its `-sanitizer-coverage-*` options in
# RUSTFLAGS); this removes that instrumentation from the crates that check the
# backend rather than make it up: the kit (`commcheck`: the model, the matrix,
# the worlds), the reference harnesses (`commcheck_reference`) and the targets
# themselves, where the kit's generic code is compiled. The backend, eredu,
# the mesh and commcheck-report's parsers keep it.
#
# Why: libFuzzer pays for every coverage feature an input hits (entropic
# scheduling keeps a frequency per rare feature), and the kit's own edges
# were two thirds of the counters, so most of libFuzzer's time per input went
# to the kit's bookkeeping rather than to the backend's behaviour
# (fuzz/README.md, "Coverage").
#
# cargo runs it as `coverage-scope.sh RUSTC ARGS...`; any other crate, and any
# build without sancov, runs RUSTC ARGS... unchanged.
set -euo pipefail
rustc=$1
shift
crate=
previous=
for arg in "$@"; do
  [ "$previous" = --crate-name ] && crate=$arg
  previous=$arg
done
case "$crate" in
  commcheck | commcheck_reference | sequence | boundary | deadlines | report) ;;
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
