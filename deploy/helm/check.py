#!/usr/bin/env python3
"""make test-deploy-helm: the chart rendered by Helm's own engine (PyPI helm-python-sdk, the
Helm v4 Go SDK behind a C ABI: no helm binary is obtainable here) and every manifest checked
against the Kubernetes OpenAPI schemas bundled in PyPI's kubernetes-validate (strict: unknown
fields are errors), for the default values and for each coordinator; plus `helm lint --strict`
and the chart's own refusals. Prints one line per case and ends with 'N passed, N failed'.
"""
import sys
from pathlib import Path

import kubernetes_validate
import yaml
from helm_python import chart as helm

CHART = Path(__file__).resolve().parent / "clockflake-server"
KUBE_VERSIONS = ["1.28.0", kubernetes_validate.latest_version()]

CASES = {
    "defaults": {},
    "postgres (uri in values)": {
        "coordinator": "postgres",
        "lease": {"uri": "postgres://ids:secret@postgres:5432/ids?app=ids&ttl=10s"},
    },
    "redis": {"coordinator": "redis", "lease": {"existingSecret": "ids-redis"}},
    "zookeeper": {
        "coordinator": "zookeeper",
        "lease": {"existingSecret": "ids-zk"},
        "layout": "twitter",
        "replicas": 5,
        "publicIds": {"existingSecret": "ids-public"},
    },
    "redis with TLS and a public-id token": {
        "coordinator": "redis",
        "lease": {"existingSecret": "ids-redis"},
        "publicIds": {"existingSecret": "ids-public", "tokenSecret": "ids-token"},
        "tls": {"secretName": "ids-tls"},
    },
    "k8s (StatefulSet)": {"coordinator": "k8s", "persistence": {"storageClassName": "fast"}},
}
REFUSED = {
    "replicas past the pool": ({"layout": "js53", "replicas": 17}, "exceed the layout's 16"),
    "unknown coordinator": ({"coordinator": "etcd"}, "expected postgres, redis"),
    "custom layout without poolSize": (
        {"layout": "timestamp:41,worker:7,sequence:12;epoch=0"}, "set poolSize"),
    "no lease secret": ({"lease": {"existingSecret": ""}}, "lease.existingSecret"),
}


def documents(rendered):
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                yield path, doc


def container(pod_spec):
    return pod_spec["template"]["spec"]["containers"][0]


def check_case(name, values):
    chart = helm.Chart.load(CHART)
    docs = list(documents(chart.render(values, name="ids", namespace="ids", is_install=True)))
    kinds = {}
    for path, doc in docs:
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)
        kinds.setdefault(doc["kind"], []).append(doc)
    coordinator = values.get("coordinator", "postgres")
    workload = (kinds["StatefulSet"] if coordinator == "k8s" else kinds["Deployment"])[0]
    spec = workload["spec"]
    c = container(spec)
    probes = (c["readinessProbe"]["httpGet"]["path"], c["livenessProbe"]["httpGet"]["path"])
    assert probes == ("/readyz", "/healthz"), probes
    env = {e["name"]: e for e in c["env"]}
    assert "PodDisruptionBudget" in kinds, "no PodDisruptionBudget"
    assert kinds["PodDisruptionBudget"][0]["spec"]["selector"]["matchLabels"] == \
        spec["selector"]["matchLabels"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    scheme = "HTTPS" if values.get("tls", {}).get("secretName") else "HTTP"
    assert {c[p]["httpGet"]["scheme"] for p in ("readinessProbe", "livenessProbe",
                                                "startupProbe")} == {scheme}
    if scheme == "HTTPS":
        assert "--tls-cert" in c["args"] and "--tls-key" in c["args"], c["args"]
        mounted = {m["mountPath"] for m in c["volumeMounts"]}
        assert {"/etc/clockflake/tls", "/etc/clockflake/token"} <= mounted, mounted
        assert env["CLOCKFLAKE_PUBLIC_TOKEN_FILE"]["value"] == "/etc/clockflake/token/token"
    if coordinator == "k8s":
        assert "Deployment" not in kinds
        assert env["CLOCKFLAKE_LEASE"]["value"].startswith("k8s:///var/lib/clockflake?app=")
        assert "apps.kubernetes.io/pod-index" in \
            env["CLOCKFLAKE_POD_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
        claim = spec["volumeClaimTemplates"][0]
        assert claim["metadata"]["name"] == "marks"
        assert {"name": "marks", "mountPath": "/var/lib/clockflake"} in c["volumeMounts"]
    else:
        assert "StatefulSet" not in kinds
        rolling = spec["strategy"]["rollingUpdate"]
        assert rolling["maxSurge"] == 0, rolling
        ref = env["CLOCKFLAKE_LEASE"]["valueFrom"]["secretKeyRef"]
        if values.get("lease", {}).get("uri"):
            secret = kinds["Secret"][0]
            assert secret["metadata"]["name"] == ref["name"]
            assert "uri" in secret["stringData"]
        else:
            assert "Secret" not in kinds
            assert ref["name"] == values.get("lease", {}).get("existingSecret", "clockflake-lease")
    # No secret in plain text anywhere but the chart's own Secret.
    for _, doc in docs:
        if doc["kind"] != "Secret":
            assert "secret@" not in yaml.safe_dump(doc), doc["kind"]
    return f"{len(docs)} manifests valid for Kubernetes {', '.join(KUBE_VERSIONS)}"


def check_refused(values, expected):
    try:
        helm.Chart.load(CHART).render(values, name="ids", namespace="ids")
    except Exception as error:  # HelmRenderError
        assert expected in str(error), str(error)
        return f"refused: {expected}"
    raise AssertionError("rendered, expected a refusal")


def main():
    passed = failed = 0
    report = helm.lint(CHART, strict=True)
    lint_errors = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2]
    results = [("helm lint --strict", lambda: (_ for _ in ()).throw(AssertionError(lint_errors))
                if lint_errors or report.get("errors") else "clean")]
    results += [(f"render {name}", lambda v=values, n=name: check_case(n, v))
                for name, values in CASES.items()]
    results += [(f"refuse {name}", lambda v=values, e=expected: check_refused(v, e))
                for name, (values, expected) in REFUSED.items()]
    for name, run in results:
        try:
            print(f"ok   {name}: {run()}")
            passed += 1
        except Exception as error:
            print(f"FAIL {name}: {type(error).__name__}: {error}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
