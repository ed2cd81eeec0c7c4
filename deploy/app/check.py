#!/usr/bin/env python3
"""make test-deploy-app: the example application's Kubernetes manifests (deployment.yaml,
statefulset.yaml, secret.example.yaml) validated against the Kubernetes OpenAPI schemas bundled in
PyPI's kubernetes-validate (1.28 and the newest it has; strict: an unknown field is an error), as
deploy/helm/check.py validates the chart, and the lifecycle's invariants checked with numbers:
readiness on /readyz with the Host header Django accepts, liveness elsewhere, a preStop sleep,
terminationGracePeriodSeconds above preStop + Gunicorn's graceful_timeout, graceful_timeout
above 10 s of requests in flight + close() (2 s + the TTL of the Secret's URI), the pool, and
k8s://'s ordinal, volume and one process per pod. Prints one line per check; exits 1 on a failure.
"""

import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import kubernetes_validate
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KUBE_VERSIONS = ["1.28.0", kubernetes_validate.latest_version()]
POOL = 128  # worker ids of the default layout, clockseq
DRAIN_S = 10  # the requests in flight the budget allows for
CLOSE_S = 2  # close(): a renewal in flight, then (TTL/2, plus a reconnection of TTL/2)
GUNICORN = (ROOT / "examples/python/django_orders/gunicorn.conf.py").read_text()


def load(name):
    return [doc for doc in yaml.safe_load_all((HERE / name).read_text()) if doc]


def seconds(ttl):
    match = re.fullmatch(r"(\d+)(ms|s|m)?", ttl)
    value, unit = int(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60}[unit]


def gunicorn_setting(name):
    return int(re.search(rf"^{name} = (\d+)", GUNICORN, re.M).group(1))


def check_lifecycle(kind, spec, ttl_s):
    pod = spec["template"]["spec"]
    app = pod["containers"][0]
    env = {e["name"]: e for e in app["env"]}
    ready = app["readinessProbe"]["httpGet"]
    assert ready["path"] == "/readyz", ready
    assert {"name": "Host", "value": "localhost"} in ready["httpHeaders"], ready
    assert "/readyz" not in yaml.safe_dump(app["livenessProbe"]), "liveness on /readyz"
    sleep = app["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "/bin/sleep", sleep
    pre_stop = int(sleep[1])
    graceful = gunicorn_setting("graceful_timeout")
    grace = pod["terminationGracePeriodSeconds"]
    assert graceful >= DRAIN_S + CLOSE_S + ttl_s, (graceful, ttl_s)
    assert grace > pre_stop + graceful, (grace, pre_stop, graceful)
    assert 'os.environ.get("BIND"' in GUNICORN and "WEB_CONCURRENCY" in GUNICORN
    assert "clockflake.django.reset()" in GUNICORN.split("def worker_exit", 1)[1]
    return env, grace, pre_stop, graceful


def main():
    passed = failed = 0

    def check(what, fn):
        nonlocal passed, failed
        try:
            detail = fn()
        except Exception as error:  # an AssertionError or a schema error
            failed += 1
            print(f"FAIL {what}: {type(error).__name__}: {error}")
        else:
            passed += 1
            print(f"ok   {what}" + (f": {detail}" if detail else ""))

    for name in ("deployment.yaml", "statefulset.yaml", "secret.example.yaml"):

        def validate(name=name):
            docs = load(name)
            for doc in docs:
                for version in KUBE_VERSIONS:
                    kubernetes_validate.validate(doc, version, strict=True)
            kinds = ", ".join(doc["kind"] for doc in docs)
            return f"{kinds} valid for Kubernetes {', '.join(KUBE_VERSIONS)}"

        check(f"{name} against the schemas", validate)

    def deployment():
        docs = {doc["kind"]: doc for doc in load("deployment.yaml")}
        secret = load("secret.example.yaml")[0]
        uri = secret["stringData"]["uri"]
        ttl_s = seconds(parse_qs(urlsplit(uri).query)["ttl"][0])
        spec = docs["Deployment"]["spec"]
        env, grace, pre_stop, graceful = check_lifecycle("Deployment", spec, ttl_s)
        ref = env["CLOCKFLAKE_URI"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": secret["metadata"]["name"], "key": "uri"}, ref
        processes = int(env["WEB_CONCURRENCY"]["value"])
        surge = spec["strategy"]["rollingUpdate"]["maxSurge"]
        held = (spec["replicas"] + surge) * processes
        assert held <= POOL, held
        assert docs["PodDisruptionBudget"]["spec"]["selector"] == spec["selector"]
        return (
            f"grace {grace} s > preStop {pre_stop} s + graceful_timeout {graceful} s "
            f">= {DRAIN_S} s + {CLOSE_S} s + ttl {ttl_s:g} s; {held} worker ids at most "
            f"in a rollout, of {POOL}"
        )

    check("deployment.yaml: readiness, preStop, grace against the TTL, the pool", deployment)

    def statefulset():
        docs = {doc["kind"]: doc for doc in load("statefulset.yaml")}
        spec = docs["StatefulSet"]["spec"]
        env, grace, pre_stop, graceful = check_lifecycle("StatefulSet", spec, 0)
        uri = urlsplit(env["CLOCKFLAKE_URI"]["value"])
        assert uri.scheme == "k8s", uri
        index = env["CLOCKFLAKE_POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
        assert index == "metadata.labels['apps.kubernetes.io/pod-index']", index
        assert env["WEB_CONCURRENCY"]["value"] == "1"  # one worker id per pod
        mounts = {
            m["mountPath"]: m["name"]
            for m in spec["template"]["spec"]["containers"][0]["volumeMounts"]
        }
        claims = {c["metadata"]["name"] for c in spec["volumeClaimTemplates"]}
        assert mounts.get(uri.path) in claims, (uri.path, mounts, claims)
        assert spec["replicas"] <= POOL
        assert spec["podManagementPolicy"] == "OrderedReady"
        assert spec["serviceName"] == docs["Service"]["metadata"]["name"]
        assert docs["Service"]["spec"]["clusterIP"] == "None"
        return (
            f"{env['CLOCKFLAKE_URI']['value']} on the claim {mounts[uri.path]!r}; grace {grace} s > "
            f"preStop {pre_stop} s + graceful_timeout {graceful} s"
        )

    check("statefulset.yaml: k8s:// ordinal, its volume, one process, grace", statefulset)

    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
