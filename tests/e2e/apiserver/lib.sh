# Shared by build.sh, start.sh and stop.sh: where things live, and the
# process helpers. Every value can be set in the environment first.
# Only loopback addresses are used.

BIN_DIR=${BIN_DIR:-$HOME/.cache/kube-apiserver/bin}
WORK_DIR=${WORK_DIR:-/tmp/kserve-injector-apiserver}
APISERVER_PORT=${APISERVER_PORT:-36443}
ETCD_CLIENT_PORT=${ETCD_CLIENT_PORT:-32379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-32380}
APISERVER_EXTRA_ARGS=${APISERVER_EXTRA_ARGS:-}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-120}

pki=$WORK_DIR/pki
logs=$WORK_DIR/logs
pids=$WORK_DIR/pids

say() { echo "apiserver: $*" >&2; }

# True while the process whose PID is saved as $pids/NAME.pid runs.
running() { [ -f "$pids/$1.pid" ] && kill -0 "$(cat "$pids/$1.pid")" 2>/dev/null; }

# Stops the process saved as $pids/NAME.pid: TERM, up to 10 s, then KILL.
halt() {
  local file=$pids/$1.pid pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    say "stopped $1 ($pid)"
  fi
  rm -f "$file"
}
