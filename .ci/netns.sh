# Stand-in hosts for process worlds, sourced by .ci/hosts.sh and
# .ci/faults.sh: network namespaces cc-h0..cc-h{N-1}, joined by a bridge in
# a namespace of its own (cc-sw), on 10.231.7.0/24 with no route out; mpirun
# starts one rank per host (a hostfile) through an rsh agent that enters the
# namespace, and COMMCHECK_MESH_ADDRESS puts the kit's control plane and the
# CPU backend's transport on that network.
#
#   netns_permitted     exits 0 with a line saying so where `ip netns` is not
#                       permitted (needs root and network namespaces)
#   netns_hosts N       builds N hosts (trap netns_cleanup EXIT first)
#   netns_launch BINARY ARGS...
#                       mpirun -n N BINARY ARGS... from cc-h0, killed after
#                       NETNS_LIMIT seconds (default 3600; then status 124)
#   netns_started LOG PID [PATTERN]
#                       waits (at most 60 s) until LOG matches PATTERN
#                       (default: the certification has finished cases) or
#                       the launch PID ended; otherwise ends every process
#                       on the hosts, says so, and fails (Open MPI's daemon
#                       launch across the namespaces sometimes stalls before
#                       any rank starts)
#   netns_watched LOG PATTERN BINARY ARGS...
#                       netns_launch in the background (its pid in
#                       netns_pid, its output in LOG), launched again when
#                       it stalls (netns_started), at most three times
#   netns_leftovers NAME
#                       the processes named NAME still in any host (pid, host)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
net=10.231.7
netns_count=0
netns_dir=""

netns_permitted() {
  if ! ip netns add cc-probe 2>/dev/null; then
    echo "$(basename "$0"): skipped: this machine does not permit 'ip netns add' (needs root and network namespaces)"
    exit 0
  fi
  ip netns del cc-probe
}

netns_cleanup() {
  local i
  for i in $(seq 0 $((netns_count - 1))); do
    ip netns pids "cc-h$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "cc-h$i" 2>/dev/null || true
  done
  ip netns del cc-sw 2>/dev/null || true
  [ -z "$netns_dir" ] || rm -rf "$netns_dir"
}

# Whether host $1 reaches address $2: a TCP connect to a closed port (bash's
# /dev/tcp, no tool needed) answers "refused" once the route works.
netns_reaches() {
  local said
  said=$(ip netns exec "cc-h$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1) && return 0
  [[ $said == *refused* ]]
}

netns_hosts() {
  local i j tries
  netns_count=$1
  netns_cleanup
  netns_dir=$(mktemp -d)
  ip netns add cc-sw
  ip -n cc-sw link add br0 type bridge
  ip -n cc-sw link set br0 up
  : >"$netns_dir/hostfile"
  for i in $(seq 0 $((netns_count - 1))); do
    ip netns add "cc-h$i"
    ip link add "cc-v$i" type veth peer name "cc-p$i"
    ip link set "cc-v$i" netns "cc-h$i"
    ip link set "cc-p$i" netns cc-sw
    ip -n cc-sw link set "cc-p$i" master br0 up
    ip -n "cc-h$i" addr add "$net.$((i + 1))/24" dev "cc-v$i"
    ip -n "cc-h$i" link set "cc-v$i" up
    ip -n "cc-h$i" link set lo up
    echo "cc-h$i slots=1" >>"$netns_dir/hostfile"
  done
  # The links come up asynchronously: wait (up to 20 s) until every host
  # reaches every other, so that mpirun's daemons can call back.
  for i in $(seq 0 $((netns_count - 1))); do
    for j in $(seq 0 $((netns_count - 1))); do
      tries=0
      until netns_reaches "$i" "$net.$((j + 1))"; do
        tries=$((tries + 1))
        [ "$tries" -lt 40 ] || { echo "$(basename "$0"): host cc-h$i cannot reach $net.$((j + 1))"; exit 1; }
        sleep 0.5
      done
    done
  done
  # mpirun's rsh agent: HOST COMMAND... runs COMMAND in namespace HOST.
  cat >"$netns_dir/netns-rsh" <<'AGENT'
#!/bin/sh
host="$1"; shift
exec ip netns exec "$host" /bin/sh -c "$*"
AGENT
  chmod +x "$netns_dir/netns-rsh"
}

netns_launch() {
  local binary=$1 name forward=()
  shift
  # Forward the settings that are set (mpirun -x refuses an unset name).
  for name in COMMCHECK_MESH_ADDRESS COMMCHECK_CASE_TIMEOUT_MS COMMCHECK_GRACE_MS COMMCHECK_RESULTS; do
    if [ -n "${!name+set}" ]; then forward+=(-x "$name"); fi
  done
  ip netns exec cc-h0 timeout -k 10 "${NETNS_LIMIT:-3600}" mpirun --mca plm_rsh_agent "$netns_dir/netns-rsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca routed direct --hostfile "$netns_dir/hostfile" -n "$netns_count" \
    --mca oob_tcp_if_include "$net.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" \
    "${forward[@]}" -x PATH "$binary" "$@"
}

netns_started() {
  local tries=0 i pattern=${3:-cases done after}
  while kill -0 "$2" 2>/dev/null && ! grep -q "$pattern" "$1" 2>/dev/null && [ "$tries" -lt 120 ]; do
    tries=$((tries + 1))
    sleep 0.5
  done
  grep -q "$pattern" "$1" 2>/dev/null && return 0
  kill -0 "$2" 2>/dev/null || return 0
  echo "$(basename "$0"): nothing matched /$pattern/ within 60 s of the launch: mpirun's daemons did not start every rank (Open MPI's launch across the namespaces stalled); ending it"
  for i in $(seq 0 $((netns_count - 1))); do ip netns pids "cc-h$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true; done
  wait "$2" 2>/dev/null || true
  return 1
}

netns_watched() {
  local log=$1 pattern=$2 try
  shift 2
  for try in 1 2 3; do
    netns_launch "$@" >"$log" 2>&1 &
    netns_pid=$!
    netns_started "$log" "$netns_pid" "$pattern" && return 0
  done
  echo "$(basename "$0"): three launches stalled before any rank started"
  return 1
}

netns_leftovers() {
  local i
  for i in $(seq 0 $((netns_count - 1))); do
    netns_named "cc-h$i" "$1" | sed "s/\$/ (cc-h$i)/"
  done
}

# The pids of processes named $2 in host $1.
netns_named() {
  local pid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ]; then echo "$pid"; fi
  done
}
