#!/usr/bin/env bash
# Starts etcd and kube-apiserver (built by build.sh: 1.36, or 1.31 with
# KUBE_MINOR=1.31) on 127.0.0.1, with
# RBAC, the mutating and validating webhook admission plugins and an audit
# log of pod requests; no scheduler, kubelet or controller-manager, so pods
# are stored, never run. Prints the admin kubeconfig's path as the last
# line of stdout; progress on stderr.
#
#   WORK_DIR   certificates (pki/), logs (logs/, audit.log among them),
#              pids/, etcd's data and the kubeconfig
#   KUBE_MINOR, APISERVER_PORT, ETCD_CLIENT_PORT, ETCD_PEER_PORT, BIN_DIR,
#   APISERVER_EXTRA_ARGS (such as --token-auth-file=...),
#   DISABLE_ADMISSION (ServiceAccount; empty: every default plugin on)
#
# The certificates are made once per WORK_DIR (a restart keeps them, so
# clients keep trusting the server); etcd starts empty every time.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
for tool in "$BIN_DIR/etcd" "$BIN_DIR/kube-apiserver"; do
  [ -x "$tool" ] || { say "no $tool: run bash .ci/e2e.sh (or tests/e2e/apiserver/build.sh $KUBE_MINOR)"; exit 1; }
done
for tool in openssl curl; do
  command -v "$tool" >/dev/null || { say "$tool is needed"; exit 1; }
done
mkdir -p "$pki" "$logs" "$pids"
kubeconfig=$WORK_DIR/kubeconfig
if running etcd && running kube-apiserver; then
  say "already running"
  echo "$kubeconfig"
  exit 0
fi
halt kube-apiserver
halt etcd

# One CA signs the server's certificate, the admin's client certificate
# (group system:masters: every permission under RBAC) and a serving
# certificate for a webhook on 127.0.0.1.
signed() { # NAME SUBJECT EXTENSIONS
  openssl req -new -nodes -newkey rsa:2048 -subj "$2" -keyout "$pki/$1.key" -out "$pki/$1.csr" 2>/dev/null
  printf '%b\n' "$3" > "$pki/$1.ext"
  openssl x509 -req -sha256 -days 365 -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -extfile "$pki/$1.ext" -out "$pki/$1.crt" 2>/dev/null
  rm -f "$pki/$1.csr" "$pki/$1.ext"
}
if [ ! -s "$pki/sa.pub" ]; then
  openssl req -x509 -new -nodes -newkey rsa:2048 -sha256 -days 365 -subj /CN=kserve-injector-e2e-ca \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  server_ext='keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth'
  signed apiserver /CN=kube-apiserver "$server_ext\nsubjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.96.0.1"
  signed admin /O=system:masters/CN=e2e-admin 'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
  signed webhook /CN=127.0.0.1 "$server_ext\nsubjectAltName=IP:127.0.0.1,DNS:localhost"
  # The ServiceAccount token signing pair.
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 600 "$pki"/*.key
fi

cat > "$WORK_DIR/audit-policy.yaml" <<POLICY
# Pod requests at level Request: the entries carry the webhook annotations
# (mutation.webhook.admission.k8s.io/round_R_index_I) of every call.
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Request
  resources: [{group: "", resources: [pods]}]
- level: None
POLICY
cat > "$kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $pki/ca.crt
users:
- name: e2e-admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e-admin, namespace: default}
current-context: e2e
KUBECONFIG

started=$(date +%s)
rm -rf "$WORK_DIR/etcd"
nohup "$BIN_DIR/etcd" --name e2e --data-dir "$WORK_DIR/etcd" --log-level warn --logger zap \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
  > "$logs/etcd.log" 2>&1 &
echo $! > "$pids/etcd.pid"
until curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health" 2>/dev/null | grep -q '"health":"true"'; do
  running etcd || { say "etcd exited:"; tail -20 "$logs/etcd.log" >&2; exit 1; }
  [ $(( $(date +%s) - started )) -lt "$READY_TIMEOUT_S" ] || { say "etcd not healthy after $READY_TIMEOUT_S s"; exit 1; }
  sleep 0.1
done

# shellcheck disable=SC2086 # APISERVER_EXTRA_ARGS holds several flags
nohup "$BIN_DIR/kube-apiserver" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
  --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" --cert-dir="$WORK_DIR/apiserver-certs" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=10.96.0.0/24 --endpoint-reconciler-type=none \
  --authorization-mode=RBAC \
  --enable-admission-plugins=MutatingAdmissionWebhook,ValidatingAdmissionWebhook \
  --disable-admission-plugins="$DISABLE_ADMISSION" \
  --allow-privileged=true --profiling=false --v=1 \
  --audit-policy-file="$WORK_DIR/audit-policy.yaml" --audit-log-path="$logs/audit.log" \
  $APISERVER_EXTRA_ARGS \
  > "$logs/kube-apiserver.log" 2>&1 &
echo $! > "$pids/kube-apiserver.pid"
# (The ServiceAccount admission plugin is off unless DISABLE_ADMISSION says
# otherwise: no controller-manager creates the default ServiceAccount it
# would require of every pod.)

admin_get() {
  curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT$1" 2>/dev/null
}
# Ready, then the default namespace, which the server creates shortly after.
until [ "$(admin_get /readyz)" = ok ] && admin_get /api/v1/namespaces/default >/dev/null; do
  running kube-apiserver || { say "kube-apiserver exited:"; tail -30 "$logs/kube-apiserver.log" >&2; exit 1; }
  [ $(( $(date +%s) - started )) -lt "$READY_TIMEOUT_S" ] || {
    say "kube-apiserver not ready after $READY_TIMEOUT_S s"; tail -30 "$logs/kube-apiserver.log" >&2; exit 1; }
  sleep 0.2
done
say "$("$BIN_DIR/kube-apiserver" --version) ready on 127.0.0.1:$APISERVER_PORT after $(( $(date +%s) - started )) s (logs in $logs)"
echo "$kubeconfig"
