"""Checks on rendered manifests, used by the tests in tests/manifests (the
kustomize install in test_install.py, the Helm chart in test_helm.py). Each
check raises CheckFailed with the reason when its input is bad, and returns
a line saying what it checked otherwise."""

import base64
import json
import os
import re
import subprocess
import tempfile

import yaml

SERVICE = "kserve-injector"
OUR_WEBHOOK = "kserve-injector"
KSERVE_WEBHOOK = "inferenceservice.serving.kserve.io"
KSERVE_POD_MUTATOR = "inferenceservice.kserve-webhook-server.pod-mutator"
KSERVE_DEFAULTER = "inferenceservice.kserve-webhook-server.defaulter"
# Where client-side apply's last-applied-configuration annotation stops fitting.
ANNOTATION_LIMIT = 262144
CLUSTER_SCOPED = {
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PriorityClass",
}


class CheckFailed(Exception):
    pass


def load(path):
    with open(path, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    if not docs:
        raise CheckFailed(f"{path}: no objects")
    return docs


def ident(doc):
    meta = doc.get("metadata") or {}
    return f"{doc.get('kind')}/{meta.get('name')}"


def group_of(doc):
    api = doc.get("apiVersion", "")
    return api.split("/")[0] if "/" in api else ""


def is_builtin(doc):
    group = group_of(doc)
    return group == "" or "." not in group or group.endswith(".k8s.io")


def schemas(custom, schema_dir):
    import jsonschema
    from referencing import Registry, Resource

    with open(custom, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    resources = []
    for name in sorted(os.listdir(schema_dir)):
        with open(os.path.join(schema_dir, name), encoding="utf-8") as f:
            resources.append((name, Resource.from_contents(json.load(f))))
    registry = Registry().with_resources(resources)
    errors = []
    for doc in docs:
        version = doc.get("apiVersion", "").split("/")[-1]
        name = f"{group_of(doc)}_{version}_{doc.get('kind')}.json"
        if not os.path.exists(os.path.join(schema_dir, name)):
            errors.append(f"{ident(doc)}: no schema {schema_dir}/{name}")
            continue
        schema = registry.contents(name)
        validator = jsonschema.Draft202012Validator(schema, registry=registry)
        for err in validator.iter_errors(doc):
            path = "/".join(str(p) for p in err.absolute_path)
            errors.append(f"{ident(doc)} at /{path}: {err.message}")
    if errors:
        raise CheckFailed("\n".join(errors))
    print(f"{custom}: {len(docs)} objects match {schema_dir}")


def validate(docs, where, schema_dir, versions):
    """kubernetes-validate --strict for each version on the built-in kinds (a
    kind without a schema fails, like its WARN did); the others (cert-manager,
    ServiceMonitor) against schema_dir."""
    import kubernetes_validate

    custom = []
    for doc in docs:
        if is_builtin(doc):
            for version in versions:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except Exception as e:  # ValidationError, SchemaNotFoundError, ...
                    path = ".".join(str(p) for p in getattr(e, "path", ()))
                    message = getattr(e, "message", None) or str(e)
                    where_in = f" at {path}" if path else ""
                    raise CheckFailed(f"{ident(doc)} against {version}{where_in}: "
                                      f"{message}") from e
        else:
            custom.append(doc)
    if custom:
        custom_path = f"{where}.custom.yaml"
        with open(custom_path, "w", encoding="utf-8") as f:
            yaml.safe_dump_all(custom, f, sort_keys=False)
        schemas(custom_path, schema_dir)
    return f"{where}: {len(docs) - len(custom)} built-in objects valid for {versions}, {len(custom)} match {schema_dir}"


def size(rendered):
    docs = load(rendered)
    largest = max(docs, key=lambda d: len(json.dumps(d, separators=(",", ":"))))
    biggest = len(json.dumps(largest, separators=(",", ":")))
    for doc in docs:
        n = len(json.dumps(doc, separators=(",", ":")))
        if n >= ANNOTATION_LIMIT:
            raise CheckFailed(
                f"{ident(doc)} is {n} bytes as JSON: client-side apply's "
                f"last-applied annotation must stay below {ANNOTATION_LIMIT}"
            )
    print(f"{rendered}: largest object {ident(largest)}, {biggest} bytes (< {ANNOTATION_LIMIT})")


def openssl(*args):
    run = subprocess.run(["openssl", *args], capture_output=True, text=True)
    return run.returncode, (run.stdout + run.stderr).strip()


def check_static_certs(docs, namespace, errors):
    """The serving Secret must chain to the caBundle and name the Service."""
    secrets = [d for d in docs if d.get("kind") == "Secret"
               and d["metadata"]["name"] == "kserve-injector-serving-cert"]
    if not secrets:
        return
    data = secrets[0].get("data", {})
    webhook = [d for d in docs if d.get("kind") == "MutatingWebhookConfiguration"
               and d["metadata"]["name"] == OUR_WEBHOOK][0]
    bundle = webhook["webhooks"][0]["clientConfig"].get("caBundle", "")
    if "".join(bundle.split()) != "".join(data.get("ca.crt", "").split()):
        errors.append("the webhook's caBundle is not the Secret's ca.crt")
    with tempfile.TemporaryDirectory() as tmp:
        for key in ("tls.crt", "ca.crt"):
            with open(os.path.join(tmp, key), "wb") as f:
                f.write(base64.b64decode(data.get(key, "")))
        code, out = openssl("verify", "-CAfile", os.path.join(tmp, "ca.crt"),
                            os.path.join(tmp, "tls.crt"))
        if code != 0:
            errors.append(f"tls.crt does not chain to ca.crt: {out}")
        host = f"{SERVICE}.{namespace}.svc"
        code, out = openssl("x509", "-in", os.path.join(tmp, "tls.crt"), "-noout",
                            "-checkhost", host)
        if code != 0 or "does match" not in out:
            errors.append(f"tls.crt is not valid for {host}: {out}")


def namespaces(rendered, namespace):
    """Every place a namespace is spelled out agrees with `namespace`."""
    docs = load(rendered)
    errors = []
    checked = 0
    # namespaced lookups (--namespaces): their Roles live in the namespaces served
    served = set()
    # a URL clientConfig's host is in the serving certificate as the URL names it
    url_hosts = {re.sub(r"^https://([^/:]+).*$", r"\1", h["clientConfig"]["url"])
                 for d in docs if d.get("kind") == "MutatingWebhookConfiguration"
                 for h in d.get("webhooks", []) if "url" in h.get("clientConfig", {})}
    for doc in docs:
        if doc.get("kind") == "Deployment":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                for arg in c.get("args", []):
                    if arg.startswith("--namespaces="):
                        served.update(arg.split("=", 1)[1].split(","))
    for doc in docs:
        meta = doc.get("metadata") or {}
        kind = doc.get("kind")
        if kind in ("Role", "RoleBinding") and meta.get("namespace") in served:
            checked += 1
        elif kind not in CLUSTER_SCOPED:
            checked += 1
            if meta.get("namespace") != namespace:
                errors.append(f"{ident(doc)}: metadata.namespace is {meta.get('namespace')!r}")
        if kind == "MutatingWebhookConfiguration" and meta.get("name") == OUR_WEBHOOK:
            for hook in doc.get("webhooks", []):
                checked += 1
                if "url" in hook["clientConfig"]:
                    continue  # webhook.url: no Service to name
                ns = hook["clientConfig"]["service"].get("namespace")
                if ns != namespace:
                    errors.append(f"webhook {hook['name']}: service namespace is {ns!r}")
            for hook in doc.get("webhooks", []):
                checked += 1
                excluded = set()
                for expr in (hook.get("namespaceSelector") or {}).get("matchExpressions", []):
                    if expr.get("key") == "kubernetes.io/metadata.name" and expr.get("operator") == "NotIn":
                        excluded.update(expr.get("values", []))
                for must in ("kube-system", namespace):
                    if must not in excluded:
                        errors.append(f"webhook {hook['name']}: the namespaceSelector does not exclude {must!r}")
            inject = (meta.get("annotations") or {}).get("cert-manager.io/inject-ca-from")
            if inject is not None:
                checked += 1
                if inject.split("/")[0] != namespace:
                    errors.append(f"{ident(doc)}: inject-ca-from is {inject!r}")
        if kind in ("ClusterRoleBinding", "RoleBinding"):
            for subject in doc.get("subjects", []):
                if subject.get("kind") == "ServiceAccount" and subject.get("name") == SERVICE:
                    checked += 1
                    if subject.get("namespace") != namespace:
                        errors.append(f"{ident(doc)}: subject ServiceAccount {SERVICE} "
                                      f"in namespace {subject.get('namespace')!r}")
        if kind == "Certificate":
            for name in doc["spec"].get("dnsNames", []):
                checked += 1
                parts = name.split(".")
                if name in url_hosts:
                    continue  # webhook.url's host, named as the URL names it
                if len(parts) < 3 or parts[1] != namespace:
                    errors.append(f"{ident(doc)}: dnsName {name!r}")
    check_static_certs(docs, namespace, errors)
    if errors:
        raise CheckFailed(f"{rendered}: not everything is in namespace {namespace!r}:\n"
                          + "\n".join(errors))
    print(f"{rendered}: {checked} namespace references agree on {namespace!r}")


def replaced(rendered):
    """KServe's pod mutator is gone, its defaulter stays, ours records it."""
    docs = load(rendered)
    kserve = [d for d in docs if d.get("kind") == "MutatingWebhookConfiguration"
              and d["metadata"]["name"] == KSERVE_WEBHOOK]
    if len(kserve) != 1:
        raise CheckFailed(f"{rendered}: expected KServe's {KSERVE_WEBHOOK}, found {len(kserve)}")
    names = [h["name"] for h in kserve[0].get("webhooks", [])]
    if KSERVE_POD_MUTATOR in names or names != [KSERVE_DEFAULTER]:
        raise CheckFailed(f"{rendered}: KServe's webhooks are {names}, expected [{KSERVE_DEFAULTER}]")
    ours = [d for d in docs if d.get("kind") == "MutatingWebhookConfiguration"
            and d["metadata"]["name"] == OUR_WEBHOOK]
    for doc in ours:
        note = (doc["metadata"].get("annotations") or {}).get("kserve-injector.kserve.io/replaces")
        if note != KSERVE_WEBHOOK:
            raise CheckFailed(f"{rendered}: our webhook does not record what it replaces ({note!r})")
    print(f"{rendered}: KServe keeps {names}, the pod mutator is removed")


DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def seconds(text):
    """A duration in Go's spelling, which `serve` reads the same way (5s,
    500ms, 1m30s, 1.5s), in seconds."""
    if not re.fullmatch(f"(?:{DURATION_PART.pattern})+", text):
        raise CheckFailed(f"cannot read the duration {text!r}")
    return sum(float(n) * UNIT_SECONDS[u] for n, u in DURATION_PART.findall(text))


def timeouts(rendered):
    """--request-timeout answers before the API server's timeoutSeconds."""
    docs = load(rendered)
    request = 5.0  # serve's default
    for doc in docs:
        if doc.get("kind") == "Deployment" and doc["metadata"]["name"] == SERVICE:
            args = doc["spec"]["template"]["spec"]["containers"][0].get("args", [])
            for i, arg in enumerate(args):
                if arg.startswith("--request-timeout="):
                    request = seconds(arg.split("=", 1)[1])
                elif arg == "--request-timeout" and i + 1 < len(args):
                    request = seconds(args[i + 1])
    margin = 2  # connection set-up and TLS handshake come out of the same budget
    for doc in docs:
        if doc.get("kind") == "MutatingWebhookConfiguration" and doc["metadata"]["name"] == OUR_WEBHOOK:
            for hook in doc["webhooks"]:
                limit = hook.get("timeoutSeconds", 10)
                if request + margin > limit:
                    raise CheckFailed(
                        f"{rendered}: --request-timeout {request:g}s is not {margin}s below "
                        f"webhook {hook['name']}'s timeoutSeconds {limit}")
    print(f"{rendered}: --request-timeout {request:g}s answers before timeoutSeconds")


def metrics(path):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        families = {fam.name: fam for fam in text_string_to_metric_families(text)}
    except Exception as e:  # the parser raises ValueError and friends
        raise CheckFailed(f"{path}: not valid OpenMetrics: {e}") from e
    samples = sum(len(f.samples) for f in families.values())
    for wanted in ("kserve_injector_requests", "kserve_injector_build"):
        if wanted not in families:
            raise CheckFailed(f"{path}: no metric family {wanted}")
    served = sum(s.value for s in families["kserve_injector_requests"].samples
                 if s.name == "kserve_injector_requests_total")
    if served < 1:
        raise CheckFailed(f"{path}: the admission request was not counted")
    print(f"{path}: {len(families)} OpenMetrics families, {samples} samples parsed")


def drop(rendered, out, *api_versions):
    """Leaves out objects of API versions an old API server lacks."""
    docs = [d for d in load(rendered) if d.get("apiVersion") not in api_versions]
    with open(out, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)
