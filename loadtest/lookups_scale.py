#!/usr/bin/env python3
"""`serve` with cluster lookups against a large cluster, in the memory limit
the chart and the kustomize base ship (128 MiB): the measurement behind
docs/performance.md's "Cluster lookups at scale" table.

A real kube-apiserver 1.36 + etcd on loopback (../shared/tools/kube-apiserver,
binaries from .ci/apiserver-bin.sh) is populated through its API, 48
requests at a time: ServiceAccounts, Secrets and InferenceServices, 50 per
namespace, each ServiceAccount listing its own Secret; Secrets of 2-10 KB
(S3 with KServe's s3-* annotations, GCS key JSON, Hugging Face tokens);
InferenceServices of about 2.8 KB (spec, status, last-applied);
ClusterStorageContainers of about 530 B, one in ten matched by a regex.
The release `serve` then runs in a 128 MiB memory cgroup as the webhook's
ServiceAccount under the shipped ClusterRole (plus list/watch on Secrets for
`--mode all`), and gets one AdmissionReview per ServiceAccount (at most
--reviews), 8 at a time, each for a pod whose storage URI one CSC matches;
every answer is checked for that pod's Secret and CSC.

    cargo build --release --locked --bin kserve-injector
    python3 loadtest/lookups_scale.py --objects 20000 --cscs 5000 --mode default
    python3 loadtest/lookups_scale.py --objects 20000 --cscs 5000 --mode all

Prints one row: ready, peak cgroup memory until ready (the caches'
first listing) and overall, reviews right, p50 / p99, OOM
kills. The cluster is kept between runs with the same --objects (only the
CSCs are changed), so several rows cost one population. Needs root and a
memory cgroup controller (loadtest/redteam.py's Cgroup).
"""
import argparse
import base64
import concurrent.futures
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "loadtest"))
from redteam import Cgroup, Peak, MIB, LIMIT  # noqa: E402

TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.environ.get("KSERVE_INJECTOR_BIN", os.path.join(TARGET, "release", "kserve-injector"))
TOOLS = os.environ.get("KUBE_APISERVER_TOOLS", os.path.join(ROOT, "..", "shared", "tools", "kube-apiserver"))
WORK = os.environ.get("SCALE_WORK_DIR", "/tmp/kapi-scale-measure")
PORT, ETCD = 26443, 26379
TOKEN = "scale-injector-token"
PER_NAMESPACE = 50


def log(message):
    print(f"scale: {message}", file=sys.stderr, flush=True)


def harness(script):
    env = dict(os.environ, WORK_DIR=WORK, APISERVER_PORT=str(PORT), ETCD_CLIENT_PORT=str(ETCD),
               ETCD_PEER_PORT=str(ETCD + 1), APISERVER_EXTRA_ARGS=f"--token-auth-file={WORK}/tokens.csv",
               BIN_DIR=subprocess.run(["bash", os.path.join(ROOT, ".ci/apiserver-bin.sh")], check=True,
                                      capture_output=True, text=True).stdout.strip())
    out = subprocess.run(["bash", script], cwd=TOOLS, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{script}: {out.stderr}")
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""


class Api:
    """The API server as its admin, one connection per thread."""

    def __init__(self):
        self.ctx = ssl.create_default_context(cafile=f"{WORK}/pki/ca.crt")
        self.ctx.load_cert_chain(f"{WORK}/pki/admin.crt", f"{WORK}/pki/admin.key")
        self.local = threading.local()

    def call(self, method, path, body=None, content_type="application/json"):
        for attempt in range(20):
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection("127.0.0.1", PORT, context=self.ctx, timeout=60)
            try:
                data = None if body is None else json.dumps(body).encode()
                conn.request(method, path, body=data, headers={"content-type": content_type})
                response = conn.getresponse()
                text = response.read()
            except (OSError, http.client.HTTPException):
                self.local.conn = None
                time.sleep(0.2)
                continue
            if response.status == 404 and attempt < 19 and method == "POST":
                time.sleep(0.5)  # a CRD just created is not served yet
                continue
            return response.status, text
        raise RuntimeError(f"{method} {path}: no answer")

    def create(self, path, body):
        status, text = self.call("POST", path, body)
        if status not in (201, 409):
            raise RuntimeError(f"POST {path}: {status} {text[:300]}")


def namespace(i):
    return f"team-{i // PER_NAMESPACE}"


def secret(i):
    ns, kind = namespace(i), i % 3
    if kind == 0:
        annotations = {"serving.kserve.io/s3-endpoint": f"minio-{i}.example.com:9000",
                       "serving.kserve.io/s3-usehttps": "1", "serving.kserve.io/s3-region": "eu-west-1",
                       "serving.kserve.io/s3-verifyssl": "1"}
        data = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
                "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                "notes": "x" * (1_500 + 80 * (i % 100))}
    elif kind == 1:
        annotations = {}
        data = {"gcloud-application-credentials.json": json.dumps(
            {"type": "service_account", "project_id": "models", "private_key": "k" * 1_700,
             "client_email": f"sa-{i}@models.iam.gserviceaccount.com"})}
    else:
        annotations = {}
        data = {"HF_TOKEN": "hf_" + "t" * 37, "README": "r" * (2_000 + 60 * (i % 100))}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"creds-{i}", "namespace": ns, "annotations": annotations},
            "stringData": data}


def account(i):
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": f"sa-{i}", "namespace": namespace(i)},
            "secrets": [{"name": f"creds-{i}"}]}


def isvc(i):
    spec = {"predictor": {"model": {"modelFormat": {"name": "sklearn"}, "storageUri": f"s3://bucket-{i}/model",
                                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}}}
    applied = json.dumps({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                          "metadata": {"name": f"isvc-{i}", "namespace": namespace(i)}, "spec": spec,
                          "padding": "p" * 1_600})
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": f"isvc-{i}", "namespace": namespace(i),
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied}},
            "spec": spec,
            "status": {"url": f"http://isvc-{i}.{namespace(i)}.example.com",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def csc_uri(j):
    return f"s3://team-{j}-models/bert" if j % 10 == 0 else f"s3://bucket-{j}/bert"


def csc(j):
    fmt = {"regex": f"^s3://team-{j}-[a-z]+/"} if j % 10 == 0 else {"prefix": f"s3://bucket-{j}/"}
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
            "metadata": {"name": f"csc-{j:05}"},
            "spec": {"container": {"name": "storage-initializer",
                                   "image": f"registry.example.com/initializer-{j}:1.0",
                                   "resources": {"requests": {"memory": "1Gi", "cpu": "100m"},
                                                 "limits": {"memory": "2Gi"}},
                                   "env": [{"name": "TEAM", "value": f"team-{j}"}]},
                     "supportedUriFormats": [fmt]}}


def parallel(api, jobs):
    with concurrent.futures.ThreadPoolExecutor(48) as pool:
        for f in concurrent.futures.as_completed([pool.submit(api.create, p, b) for p, b in jobs]):
            f.result()


def populate(api, objects, cscs):
    """Creates what is missing; deletes CSCs above `cscs`."""
    marker = os.path.join(WORK, f"populated-{objects}")
    started = time.time()
    if not os.path.exists(marker):
        log(f"creating {objects} ServiceAccounts, Secrets and InferenceServices")
        parallel(api, [("/api/v1/namespaces", {"metadata": {"name": f"team-{n}"}})
                       for n in range((objects + PER_NAMESPACE - 1) // PER_NAMESPACE)])
        jobs = []
        for i in range(objects):
            ns = namespace(i)
            jobs.append((f"/api/v1/namespaces/{ns}/secrets", secret(i)))
            jobs.append((f"/api/v1/namespaces/{ns}/serviceaccounts", account(i)))
            jobs.append((f"/apis/serving.kserve.io/v1beta1/namespaces/{ns}/inferenceservices", isvc(i)))
        parallel(api, jobs)
        open(marker, "w").close()
    status, text = api.call("GET", "/apis/serving.kserve.io/v1alpha1/clusterstoragecontainers?limit=1")
    held = json.loads(text).get("metadata", {}).get("remainingItemCount", 0) + len(json.loads(text)["items"])
    if held > cscs:
        api.call("DELETE", "/apis/serving.kserve.io/v1alpha1/clusterstoragecontainers")
    parallel(api, [("/apis/serving.kserve.io/v1alpha1/clusterstoragecontainers", csc(j)) for j in range(cscs)])
    log(f"cluster ready in {time.time() - started:.0f} s")


RBAC_SECRETS = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scale-watch-secrets}
rules: [{apiGroups: [""], resources: [secrets], verbs: [list, watch]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: scale-watch-secrets}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scale-watch-secrets}
subjects: [{kind: ServiceAccount, name: kserve-injector, namespace: kserve}]
"""


def review(i, j, uid):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"bert-{uid}", "namespace": namespace(i),
                        "labels": {"serving.kserve.io/inferenceservice": f"isvc-{i}"},
                        "annotations": {"internal.serving.kserve.io/storage-initializer-sourceuri": csc_uri(j)}},
           "spec": {"serviceAccountName": f"sa-{i}",
                    "containers": [{"name": "kserve-container", "image": "kserve/sklearnserver:latest"}]}}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": f"uid-{uid}", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                   "resource": {"group": "", "version": "v1", "resource": "pods"},
                                   "namespace": namespace(i), "operation": "CREATE", "object": pod,
                                   "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                                   "dryRun": False}}).encode()


def right(patch, i, j, cscs):
    """The pod's own Secret (by its kind) and the CSC its URI selects."""
    want = [f'"creds-{i}"']
    if i % 3 == 0:
        want.append(f"minio-{i}.example.com:9000")
    if cscs:
        want.append(f"registry.example.com/initializer-{j}:1.0")
    return all(w in patch for w in want)


def caches_state():
    """What serve's /metrics says of its caches: objects held by kind, the
    kinds over budget, the listings by how they were read."""
    conn = http.client.HTTPConnection("127.0.0.1", 26445, timeout=5)
    conn.request("GET", "/metrics")
    held, over, lists = {}, [], {}
    for line in conn.getresponse().read().decode().splitlines():
        if line.startswith("#") or "{" not in line:
            continue
        name, rest = line.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        labels = dict(part.split("=", 1) for part in labels.split(","))
        kind = labels.get("kind", "").strip('"')
        if name == "kserve_injector_cluster_cache_objects":
            held[kind] = int(float(value))
        elif name == "kserve_injector_cluster_cache_over_budget" and float(value) > 0:
            over.append(kind)
        elif name == "kserve_injector_cluster_lists_total" and float(value) > 0:
            how = labels["how"].strip('"')
            lists[how] = lists.get(how, 0) + int(float(value))
    return (f"cached {', '.join(f'{k} {v:,}' for k, v in sorted(held.items()))}; "
            f"over budget: {', '.join(over) or 'none'}; listings: {lists}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=5_000, help="ServiceAccounts, Secrets and InferenceServices each")
    parser.add_argument("--cscs", type=int, default=0, help="ClusterStorageContainers")
    parser.add_argument("--mode", choices=["default", "all"], default="default",
                        help="default lookups, or every kind watched (Secrets too)")
    parser.add_argument("--reviews", type=int, default=1_500)
    parser.add_argument("--fresh", action="store_true", help="start the API server from an empty etcd")
    parser.add_argument("--populate-only", action="store_true", help="create the objects and stop")
    parser.add_argument("--limit-mib", type=int, default=LIMIT // MIB, help="the cgroup's memory limit")
    parser.add_argument("--streaming-lists", choices=["auto", "off"], default="off",
                        help="serve's --streaming-lists: the caches filled by streaming lists, or paged LISTs")
    args = parser.parse_args()
    if args.fresh or not os.path.exists(os.path.join(WORK, "kubeconfig")):
        harness("stop.sh")
        shutil.rmtree(WORK, ignore_errors=True)
        os.makedirs(WORK)
        with open(os.path.join(WORK, "tokens.csv"), "w") as f:
            f.write(f"{TOKEN},system:serviceaccount:kserve:kserve-injector,uid-injector\n")
    harness("start.sh")
    admin = os.path.join(WORK, "kubeconfig")
    for manifest in ("tests/e2e/crds.yaml", "manifests/rbac/cluster-role.yaml"):
        subprocess.run(["kubectl", "--kubeconfig", admin, "apply", "-f", os.path.join(ROOT, manifest)],
                       check=True, capture_output=True)
    subprocess.run(["kubectl", "--kubeconfig", admin, "apply", "-f", "-"], input=RBAC_SECRETS.encode(),
                   check=True, capture_output=True)
    api = Api()
    populate(api, args.objects, args.cscs)
    if args.populate_only:
        return
    if not os.path.exists(BIN):
        sys.exit(f"no {BIN}: cargo build --release --locked --bin kserve-injector")
    cgroup = Cgroup(args.limit_mib * MIB)
    if cgroup.path is None:
        sys.exit(f"needs a memory cgroup: {cgroup.why}")

    tmp = tempfile.mkdtemp(prefix="scale-")
    kubeconfig = os.path.join(tmp, "injector.kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write(f"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:{PORT}', "
                f"certificate-authority: '{WORK}/pki/ca.crt'}}\nusers:\n- name: u\n  user: {{token: {TOKEN}}}\n"
                "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n")
    watch = ["--watch-kinds", "serviceaccounts,secrets,clusterstoragecontainers,inferenceservices"] \
        if args.mode == "all" else []
    log_file = open(os.path.join(tmp, "serve.log"), "w")
    flags = ["serve", "--addr", "127.0.0.1:26444", "--admin-addr", "127.0.0.1:26445",
             "--tls-cert-file", f"{WORK}/pki/webhook.crt", "--tls-key-file", f"{WORK}/pki/webhook.key",
             "--kubeconfig", kubeconfig, "--cluster-lookups", "on", "--shutdown-delay", "0s",
             "--streaming-lists", args.streaming_lists] + watch
    oom_before = cgroup.oom_kills()
    started = time.time()
    proc = subprocess.Popen(cgroup.enter_command() + [BIN] + flags, stdout=log_file, stderr=log_file)
    peak = Peak(proc.pid, cgroup)
    ready = listing_peak = None
    while time.time() - started < 300 and proc.poll() is None:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", 26445, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                ready = time.time() - started
                listing_peak = peak.usage
                break
        except OSError:
            pass
        time.sleep(0.05)
    if ready is not None:
        log(caches_state())
    ctx = ssl.create_default_context(cafile=f"{WORK}/pki/ca.crt")
    n = min(args.reviews, args.objects)
    results = []

    def lane(k):
        conn, out = None, []
        for r in range(k, n, 8):
            i, j = (r * 7919) % args.objects, (r * 13) % max(args.cscs, 1)
            t0 = time.time()
            try:
                conn = conn or http.client.HTTPSConnection("127.0.0.1", 26444, context=ctx, timeout=10)
                conn.request("POST", "/mutate-pods", body=review(i, j, r), headers={"content-type": "application/json"})
                answer = json.loads(conn.getresponse().read())["response"]
                patch = base64.b64decode(answer.get("patch", "")).decode() if answer.get("allowed") else ""
                out.append((time.time() - t0, right(patch, i, j, args.cscs)))
            except (OSError, ValueError, KeyError, http.client.HTTPException):
                conn = None
                out.append((time.time() - t0, False))
        return out

    if ready is not None:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for part in pool.map(lane, range(8)):
                results.extend(part)
    time.sleep(1)
    peak.stop()
    oom = cgroup.oom_kills() - oom_before
    alive = proc.poll() is None
    proc.kill()
    proc.wait()
    cgroup.remove()
    good = sorted(t for t, ok in results if ok)
    pct = (lambda q: f"{good[min(len(good) - 1, int(len(good) * q))] * 1000:.0f}") if good else (lambda q: "-")
    mode = "default" if args.mode == "default" else "every kind watched"
    mode += ", streaming lists" if args.streaming_lists == "auto" else ""
    if args.limit_mib != LIMIT // MIB:
        mode += f", {args.limit_mib} MiB limit"
    row = (f"| {args.objects:,} each | {args.cscs:,} | {mode} "
           f"| {f'{ready:.1f} s' if ready else 'never'} "
           f"| {f'{listing_peak / MIB:.0f} MiB' if listing_peak else '-'} | {peak.usage / MIB:.0f} MiB | {len(good):,} / {n:,} "
           f"| {pct(0.5)} / {pct(0.99)} ms | {'yes' if oom or not alive else 'no'} |")
    print(row, flush=True)
    if oom or not alive:
        with open(os.path.join(tmp, "serve.log")) as f:
            log("serve's last lines:\n" + "".join(f.readlines()[-15:]))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
