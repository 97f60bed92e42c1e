# Step timing for .ci/run and .ci/nightly (sourced): `step NAME` starts a
# step and says how long the one before it took; at exit, every step's time
# and the total, the slowest first.
run_start=$(date +%s)
step_start=$run_start
step_name=""
step_times=()

step_end() {
  local took
  [ -n "$step_name" ] || return 0
  took=$(($(date +%s) - step_start))
  echo "   (step: $took s)"
  step_times+=("$(printf '%6d s  %s' "$took" "$step_name")")
  step_name=""
}

step() {
  step_end
  step_name="$*"
  step_start=$(date +%s)
  echo "== $*"
}

steps_summary() {
  local status=$?
  step_end
  echo "== step times ($(basename "$0"))"
  [ "${#step_times[@]}" -eq 0 ] || printf '%s\n' "${step_times[@]}" | sort -rn
  echo "$(printf '%6d s' $(($(date +%s) - run_start)))  in all (exit status $status)"
}
trap steps_summary EXIT
