# Shared by build.sh, start.sh and stop.sh: where things live, and the
# process helpers. Every value can be set in the environment first.
# Only loopback addresses are used.

# KUBE_MINOR picks one of the versions build.sh builds: 1.36 (the default)
# or 1.31, each with its own binaries ($BIN_DIR_1_36 or $BIN_DIR_1_31, else
# the version's cache directory), work dir and ports, so both can run at once.
KUBE_MINOR=${KUBE_MINOR:-1.36}
case $KUBE_MINOR in
  1.31) default_ports="27443 24790 24800" ;;
  *) default_ports="26443 23790 23800" ;;
esac
read -r default_api default_etcd default_peer <<< "$default_ports"
bin_dir_var=BIN_DIR_${KUBE_MINOR/./_}
BIN_DIR=${BIN_DIR:-${!bin_dir_var:-$HOME/.cache/kube-apiserver-$KUBE_MINOR/bin}}
WORK_DIR=${WORK_DIR:-/tmp/kserve-injector-apiserver-$KUBE_MINOR}
APISERVER_PORT=${APISERVER_PORT:-$default_api}
ETCD_CLIENT_PORT=${ETCD_CLIENT_PORT:-$default_etcd}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-$default_peer}
APISERVER_EXTRA_ARGS=${APISERVER_EXTRA_ARGS:-}
DISABLE_ADMISSION=${DISABLE_ADMISSION-ServiceAccount}
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
