"""The Helm chart: it lints, renders what the values say, installs into a real API server, and its
RBAC is enough, and only what is needed, to run a Volcano Job from creation to garbage collection.

The template tests need only the helm binary (``e2e/cluster/build.sh helm``). The install test
uses the session's cluster: the chart's own pods stay Pending there (no kube-scheduler or
kubelet), so Caldera's three processes run locally instead, each with a token of the
ServiceAccount the chart created (TokenRequest), and any 403 in their logs fails the test.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography import x509

from caldera.api.crdgen import CRDS
from caldera.api.kinds import NODESHARD, NUMATOPOLOGY, PODGROUP, QUEUE
from caldera.api.meta import format_time
from caldera.settings import (
    ControllersSettings,
    ProcessSettings,
    SchedulerSettings,
    WebhookSettings,
    parse_settings,
)
from cli.main import build_parser
from e2e.caldera_process import CalderaProcess
from e2e.cluster.control_plane import free_port, kubectl, run_kubectl
from e2e.cluster.identities import (
    CHART,
    TEMPLATE_KUBE_VERSION,
    bound_account_kubeconfig,
    helm_binary,
    render_chart,
    write_token_kubeconfig,
)
from e2e.conftest import Cluster
from e2e.waiting import eventually
from scheduler.conf import parse_conf
from scheduler.registry import REGISTRY

pytestmark = pytest.mark.e2e

NAMESPACE = "caldera-system"
RELEASE = "rel"
FULLNAME = "rel-caldera"
SETTINGS: dict[str, type[ProcessSettings]] = {
    "controllers": ControllersSettings,
    "scheduler": SchedulerSettings,
    "webhook": WebhookSettings,
}
# Matches no object: the installed webhook configurations point at a Service without a running
# pod, and with failurePolicy Fail they would refuse every Job, Queue and Pod of the test.
NO_ADMISSION = {
    "webhook": {
        "admission": {
            "objectSelector": {"matchLabels": {"caldera.io/e2e-never": "x"}},
            # The Command webhooks ignore the objectSelector; no namespace has this label.
            "namespaceSelectorExpressions": [{"key": "caldera.io/e2e-never", "operator": "Exists"}],
        }
    }
}


# ---- helpers ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> str:
    """The helm binary built (or cached) by e2e/cluster/build.sh."""
    return helm_binary()


def _run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(argv[:3])} failed:\n{result.stderr}{result.stdout}")
    return result


def _values_file(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / f"values-{secrets.token_hex(3)}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def render(helm: str, tmp_path: Path, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``helm template`` with ``values``; the parsed objects."""
    return render_chart(
        helm, _values_file(tmp_path, values or {}), release=RELEASE, namespace=NAMESPACE
    )


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise AssertionError(
        f"no {kind} {name} in {[(o['kind'], o['metadata']['name']) for o in objects]}"
    )


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def parsed_settings(deployment: dict[str, Any]) -> ProcessSettings:
    """The container's args parsed by the real ``caldera`` command line, and validated."""
    args = container(deployment)["args"]
    namespace = build_parser().parse_args(args)
    return parse_settings(SETTINGS[args[0]], namespace, {})


def certificate(pem_b64: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(pem_b64))


# ---- helm lint and template -------------------------------------------------------------------


def test_lint(helm: str) -> None:
    """helm lint --strict passes with the default values."""
    result = _run([helm, "lint", "--strict", str(CHART)])
    assert "0 chart(s) failed" in result.stdout


def test_default_values_render(helm: str, tmp_path: Path) -> None:
    """The default render: three Deployments whose args parse into the process defaults, secure
    pods, RBAC per process, and webhook configurations that trust the serving certificate."""
    objects = render(helm, tmp_path)
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for process in SETTINGS:
        assert ("Deployment", f"{FULLNAME}-{process}") in names
        assert ("ServiceAccount", f"{FULLNAME}-{process}") in names
        assert ("ClusterRole", f"{FULLNAME}-{process}") in names
        assert ("ClusterRoleBinding", f"{FULLNAME}-{process}") in names
        assert ("Service", f"{FULLNAME}-{process}-metrics") in names
        assert ("PodDisruptionBudget", f"{FULLNAME}-{process}") in names  # 2 replicas each
    assert not of_kind(objects, "ServiceMonitor")
    assert not of_kind(objects, "CustomResourceDefinition")  # crds/ is not templated

    for process, cls in SETTINGS.items():
        deployment = find(objects, "Deployment", f"{FULLNAME}-{process}")
        settings = parsed_settings(deployment)
        assert type(settings) is cls
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == f"{FULLNAME}-{process}"
        assert pod["securityContext"]["runAsNonRoot"] is True
        sc = container(deployment)["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert container(deployment)["resources"]["requests"]
        assert settings.shutdown_grace_period < pod["terminationGracePeriodSeconds"]
        ports = {p["name"]: p["containerPort"] for p in container(deployment)["ports"]}
        assert ports["metrics"] == settings.metrics_port
        metrics = find(objects, "Service", f"{FULLNAME}-{process}-metrics")
        assert metrics["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
        assert metrics["metadata"]["annotations"]["prometheus.io/port"] == str(
            settings.metrics_port
        )
        assert container(deployment)["readinessProbe"]["httpGet"]["path"] == "/readyz"
        if process != "webhook":
            assert settings.leader_elect is True  # replicas > 1
            role = find(objects, "Role", f"{FULLNAME}-{process}-leader-election")
            assert role["metadata"]["namespace"] == NAMESPACE
            assert role["rules"][1]["resourceNames"] == [f"caldera-{process}"]

    # Scheduler: the ConfigMap is mounted where --scheduler-conf points, and it parses.
    scheduler = find(objects, "Deployment", f"{FULLNAME}-scheduler")
    conf_path = parsed_settings(scheduler)
    assert isinstance(conf_path, SchedulerSettings)
    mounts = {m["name"]: m["mountPath"] for m in container(scheduler)["volumeMounts"]}
    assert conf_path.scheduler_conf == mounts["config"] + "/scheduler.conf"
    conf = find(objects, "ConfigMap", f"{FULLNAME}-scheduler-config")["data"]["scheduler.conf"]
    parsed = parse_conf(conf, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    assert parsed.actions == ("enqueue", "allocate", "backfill")
    # What Volcano's Helm chart installs: the built-in default plus binpack, with gang and drf
    # out of preemption votes (a Volcano user's cluster schedules the same after moving over).
    assert [[p.name for p in tier] for tier in parsed.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]
    out_of_votes = [
        p.name for tier in parsed.tiers for p in tier if not p.enabled("enablePreemptable")
    ]
    assert out_of_votes == ["gang", "drf"]

    # Webhook: certificate files from the Secret; the Service targets the HTTPS port.
    webhook = find(objects, "Deployment", f"{FULLNAME}-webhook")
    ws = parsed_settings(webhook)
    assert isinstance(ws, WebhookSettings)
    mounts = {m["name"]: m["mountPath"] for m in container(webhook)["volumeMounts"]}
    assert ws.tls_cert_file == mounts["cert"] + "/tls.crt"
    assert ws.tls_key_file == mounts["cert"] + "/tls.key"
    assert ws.client_max_size == 5 * 1024 * 1024
    secret = find(objects, "Secret", f"{FULLNAME}-webhook-cert")
    volumes = {v["name"]: v for v in webhook["spec"]["template"]["spec"]["volumes"]}
    assert volumes["cert"]["secret"]["secretName"] == secret["metadata"]["name"]
    ports = {p["name"]: p["containerPort"] for p in container(webhook)["ports"]}
    assert ports["https"] == ws.port
    service = find(objects, "Service", f"{FULLNAME}-webhook")
    assert service["spec"]["ports"][0]["targetPort"] == "https"

    # The serving certificate names the Service and is signed by the caBundle's CA.
    cert = certificate(secret["data"]["tls.crt"])
    ca = certificate(secret["data"]["ca.crt"])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = sans.get_values_for_type(x509.DNSName)
    assert f"{FULLNAME}-webhook.{NAMESPACE}.svc" in dns
    assert f"{FULLNAME}-webhook" in dns
    cert.verify_directly_issued_by(ca)
    assert cert.not_valid_after_utc > dt.datetime.now(dt.UTC) + dt.timedelta(days=3000)

    mutating = find(objects, "MutatingWebhookConfiguration", f"{FULLNAME}-mutate")
    validating = find(objects, "ValidatingWebhookConfiguration", f"{FULLNAME}-validate")
    hooks = mutating["webhooks"] + validating["webhooks"]
    paths = sorted(h["clientConfig"]["service"]["path"] for h in hooks)
    # The pod webhook is off by default (webhook.admission.pods), as in Volcano's chart, and
    # /pods/mutate comes only with its feature gate (SchedulingGatesQueueAdmission).
    assert paths == sorted(set(ws.enabled_admission) - {"/pods/validate", "/pods/mutate"})
    for hook in hooks:
        assert hook["failurePolicy"] == "Fail"
        assert hook["timeoutSeconds"] == 10
        assert hook["sideEffects"] == "None"
        assert hook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        assert hook["clientConfig"]["service"]["port"] == service["spec"]["ports"][0]["port"]
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr["operator"] == "NotIn"
        assert set(expr["values"]) == {NAMESPACE, "kube-system"}
    job_validate = next(
        h for h in hooks if h["clientConfig"]["service"]["path"] == "/jobs/validate"
    )
    assert job_validate["rules"][0]["operations"] == ["CREATE", "UPDATE"]

    dashboard = find(objects, "ConfigMap", f"{FULLNAME}-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["caldera.json"])["panels"]


def test_non_default_values_render(helm: str, tmp_path: Path) -> None:
    """Changed values reach the flags exactly (big numbers without an exponent, lists joined),
    and the optional parts switch: cert-manager, ServiceMonitor, no dashboard, no PDB for one
    replica, a Lease namespace of one's choice, fewer webhooks."""
    values = {
        "image": {"repository": "registry.example/caldera", "tag": "1.2.3"},
        "controllers": {
            "replicas": 1,
            "settings": {
                "controllers": ["job", "queue"],
                "kube_qps": 75.5,
                "log_level": None,  # null: the flag is left out
                "leader_election_namespace": "ops",
                "resync_period": 0,
            },
            "extraArgs": ["--workers=9"],
        },
        "scheduler": {
            "replicas": 3,
            "settings": {"schedule_period": 0.25, "scheduler_name": "volcano,batch"},
            "conf": 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n',
        },
        "webhook": {
            "replicas": 1,
            "settings": {
                "client_max_size": 8388608,
                "enabled_admission": ["/jobs/mutate", "/jobs/validate"],
                "port": 9443,
            },
            "admission": {"timeoutSeconds": 5, "excludeNamespaces": ["monitoring"]},
        },
        "certManager": {"enabled": True},
        "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
        "grafanaDashboard": {"enabled": False},
    }
    objects = render(helm, tmp_path, values)

    controllers = find(objects, "Deployment", f"{FULLNAME}-controllers")
    assert container(controllers)["image"] == "registry.example/caldera:1.2.3"
    cs = parsed_settings(controllers)
    assert isinstance(cs, ControllersSettings)
    assert cs.controllers == ("job", "queue")
    assert cs.kube_qps == 75.5
    assert cs.resync_period == 0
    assert cs.workers == 9  # extraArgs come last and win
    assert not any(a.startswith("--log-level") for a in container(controllers)["args"])
    assert controllers["spec"]["replicas"] == 1
    role = find(objects, "Role", f"{FULLNAME}-controllers-leader-election")
    assert role["metadata"]["namespace"] == "ops"
    binding = find(objects, "RoleBinding", f"{FULLNAME}-controllers-leader-election")
    assert binding["subjects"][0]["namespace"] == NAMESPACE

    scheduler = find(objects, "Deployment", f"{FULLNAME}-scheduler")
    ss = parsed_settings(scheduler)
    assert isinstance(ss, SchedulerSettings)
    assert ss.schedule_period == 0.25
    assert ss.scheduler_names == ("volcano", "batch")
    conf = find(objects, "ConfigMap", f"{FULLNAME}-scheduler-config")["data"]["scheduler.conf"]
    assert parse_conf(conf, actions=REGISTRY.actions, plugins=REGISTRY.plugins).actions == (
        "enqueue",
        "allocate",
    )

    webhook = find(objects, "Deployment", f"{FULLNAME}-webhook")
    assert "--client-max-size=8388608" in container(webhook)["args"]
    ws = parsed_settings(webhook)
    assert isinstance(ws, WebhookSettings)
    assert ws.port == 9443
    assert {p["name"]: p["containerPort"] for p in container(webhook)["ports"]}["https"] == 9443

    # One replica: no PodDisruptionBudget; three: one.
    pdbs = [o["metadata"]["name"] for o in of_kind(objects, "PodDisruptionBudget")]
    assert pdbs == [f"{FULLNAME}-scheduler"]

    # cert-manager issues the certificate and injects the CA; the chart makes no Secret.
    assert not of_kind(objects, "Secret")
    cert = find(objects, "Certificate", f"{FULLNAME}-webhook-cert")
    assert cert["spec"]["secretName"] == f"{FULLNAME}-webhook-cert"
    assert f"{FULLNAME}-webhook.{NAMESPACE}.svc" in cert["spec"]["dnsNames"]
    assert cert["spec"]["issuerRef"]["name"] == f"{FULLNAME}-webhook-ca"
    assert find(objects, "Certificate", f"{FULLNAME}-webhook-ca")["spec"]["isCA"] is True
    assert len(of_kind(objects, "Issuer")) == 2
    mutating = find(objects, "MutatingWebhookConfiguration", f"{FULLNAME}-mutate")
    validating = find(objects, "ValidatingWebhookConfiguration", f"{FULLNAME}-validate")
    for config in (mutating, validating):
        inject = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert inject == f"{NAMESPACE}/{FULLNAME}-webhook-cert"
        (hook,) = config["webhooks"]
        assert "caBundle" not in hook["clientConfig"]
        assert hook["timeoutSeconds"] == 5
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert set(expr["values"]) == {NAMESPACE, "kube-system", "monitoring"}

    # ServiceMonitor instead of scrape annotations; no dashboard.
    monitor = find(objects, "ServiceMonitor", FULLNAME)
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    for process in SETTINGS:
        service = find(objects, "Service", f"{FULLNAME}-{process}-metrics")
        assert "annotations" not in service["metadata"]
        assert service["metadata"]["labels"]["caldera.io/metrics"] == "true"
    assert not [
        o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("dashboard")
    ]


def test_cert_manager_with_an_existing_issuer(helm: str, tmp_path: Path) -> None:
    """With certManager.issuerRef the chart makes no Issuer of its own; the webhook's and the
    visibility API's certificates come from it."""
    issuer = {"name": "corp-ca", "kind": "ClusterIssuer"}
    objects = render(helm, tmp_path, {"certManager": {"enabled": True, "issuerRef": issuer}})
    assert not of_kind(objects, "Issuer")
    assert sorted(c["metadata"]["name"] for c in of_kind(objects, "Certificate")) == [
        f"{FULLNAME}-visibility-cert",
        f"{FULLNAME}-webhook-cert",
    ]
    assert all(c["spec"]["issuerRef"] == issuer for c in of_kind(objects, "Certificate"))
    api = find(objects, "APIService", "v1alpha1.visibility.caldera.dev")
    assert api["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/{FULLNAME}-visibility-cert"
    )
    assert "caBundle" not in api["spec"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"scheduler": {"settings": {"leader_elect": False}}},
            "more than one replica needs scheduler.settings.leader_elect",
        ),
        (
            {"controllers": {"settings": {"shutdown_grace_period": 30}}},
            "must be below controllers.terminationGracePeriodSeconds",
        ),
        ({"webhook": {"settings": {"kubeconfig": "/x"}}}, "additional properties 'kubeconfig'"),
        ({"controllers": {"settings": {"workers": 0}}}, "/controllers/settings/workers"),
        (
            {"controllers": {"settings": {"controllers": ["jobs"]}}},
            "/controllers/settings/controllers",
        ),
        ({"webhook": {"admission": {"timeoutSeconds": 31}}}, "/webhook/admission/timeoutSeconds"),
    ],
)
def test_bad_values_are_refused(
    helm: str, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    """Values a process could not run with stop helm with a message naming them."""
    result = _run(
        [
            helm,
            "template",
            RELEASE,
            str(CHART),
            f"--kube-version={TEMPLATE_KUBE_VERSION}",
            "-f",
            str(_values_file(tmp_path, values)),
        ],
        check=False,
    )
    assert result.returncode != 0
    assert message in result.stderr


def test_dashboard_is_off_by_default_and_locked_down_when_on(helm: str, tmp_path: Path) -> None:
    """dashboard.enabled (off by default) renders a Deployment running `caldera dashboard
    --in-cluster` whose args parse, with the chart's security context, probes and resources; a
    Service; a NetworkPolicy admitting only the configured peers to its port; and a read-only
    ClusterRole (list and watch, Events listed, reviews created: no other verb). Without peers
    for the policy, helm stops and says what to set."""
    assert not [
        o
        for o in render(helm, tmp_path)
        if o["metadata"]["name"] == f"{FULLNAME}-dashboard" and o["kind"] != "ConfigMap"
    ]
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress"}}}
    values = {"dashboard": {"enabled": True, "networkPolicy": {"from": [peer]}}}
    objects = render(helm, tmp_path, values)
    name = f"{FULLNAME}-dashboard"
    deployment = find(objects, "Deployment", name)
    pod = deployment["spec"]["template"]["spec"]
    main = container(deployment)
    assert main["args"][:4] == ["dashboard", "--in-cluster", "--address=0.0.0.0", "--port=8090"]
    args = build_parser().parse_args(main["args"])
    assert (args.in_cluster, args.address, args.port) == (True, "0.0.0.0", 8090)  # noqa: S104
    assert pod["serviceAccountName"] == name
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    assert main["resources"]["limits"]["memory"] == "512Mi"
    service = find(objects, "Service", name)
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    policy = find(objects, "NetworkPolicy", name)["spec"]
    assert policy["ingress"] == [{"from": [peer], "ports": [{"port": "http", "protocol": "TCP"}]}]
    assert policy["podSelector"]["matchLabels"] == service["spec"]["selector"]
    rules = find(objects, "ClusterRole", name)["rules"]
    verbs = {verb for rule in rules for verb in rule["verbs"]}
    assert verbs == {"list", "watch", "get", "create"}
    got = {r for rule in rules if "get" in rule["verbs"] for r in rule["resources"]}
    assert got == {"queues/pendingjobs"}  # the visibility API's queue list, nothing stored
    created = {r for rule in rules if "create" in rule["verbs"] for r in rule["resources"]}
    assert created == {"tokenreviews", "subjectaccessreviews"}
    binding = find(objects, "ClusterRoleBinding", name)
    assert binding["subjects"][0]["name"] == name

    open_policy = {"dashboard": {"enabled": True}}
    result = _run(
        [helm, "template", RELEASE, str(CHART), f"--kube-version={TEMPLATE_KUBE_VERSION}",
         "-f", str(_values_file(tmp_path, open_policy))],
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "dashboard.networkPolicy.from must name who may reach the dashboard" in result.stderr
    no_policy = {"dashboard": {"enabled": True, "networkPolicy": {"enabled": False}}}
    assert not of_kind(render(helm, tmp_path, no_policy), "NetworkPolicy")


def test_one_replica_may_run_without_leader_election(helm: str, tmp_path: Path) -> None:
    """With one replica leader election may be off, and then no Lease Role is made."""
    values = {"scheduler": {"replicas": 1, "settings": {"leader_elect": False}}}
    objects = render(helm, tmp_path, values)
    scheduler = parsed_settings(find(objects, "Deployment", f"{FULLNAME}-scheduler"))
    assert scheduler.leader_elect is False
    roles = [o["metadata"]["name"] for o in of_kind(objects, "Role")]
    assert roles == [f"{FULLNAME}-controllers-leader-election"]


def test_pod_webhook_is_scoped_to_calderas_scheduler_names(helm: str, tmp_path: Path) -> None:
    """webhook.admission.pods registers /pods/validate with a CEL matchCondition on the pod's
    schedulerName (the webhook's scheduler names); below Kubernetes 1.30, which lacks
    matchConditions, the webhook is registered without it."""
    values = {"webhook": {"admission": {"pods": True}, "settings": {"scheduler_name": "a, b"}}}
    objects = render(helm, tmp_path, values)
    validating = find(objects, "ValidatingWebhookConfiguration", f"{FULLNAME}-validate")
    pods = next(h for h in validating["webhooks"] if h["name"] == "validatepod.volcano.sh")
    assert pods["matchConditions"] == [
        {"name": "caldera-scheduler-names", "expression": 'object.spec.schedulerName in ["a","b"]'}
    ]
    others = [h for h in validating["webhooks"] if h is not pods]
    assert others
    assert all("matchConditions" not in h for h in others)
    old = render_chart(
        helm,
        _values_file(tmp_path, values),
        release=RELEASE,
        namespace=NAMESPACE,
        kube_version="1.29.0",
    )
    validating = find(old, "ValidatingWebhookConfiguration", f"{FULLNAME}-validate")
    pods = next(h for h in validating["webhooks"] if h["name"] == "validatepod.volcano.sh")
    assert "matchConditions" not in pods


def test_pod_mutate_webhook_comes_with_its_feature_gate(helm: str, tmp_path: Path) -> None:
    """/pods/mutate (mutatepod.volcano.sh, the queue admission gate) is registered only when
    webhook.settings.feature_gates turns SchedulingGatesQueueAdmission on, for pods of
    Caldera's scheduler names; the scheduler gets its --feature-gates flag from its own
    settings."""

    def pod_hooks(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        mutating = find(objects, "MutatingWebhookConfiguration", f"{FULLNAME}-mutate")
        return [h for h in mutating["webhooks"] if h["name"] == "mutatepod.volcano.sh"]

    assert pod_hooks(render(helm, tmp_path, {})) == []
    feature = "SchedulingGatesQueueAdmission=true"
    values = {
        "webhook": {"settings": {"feature_gates": feature}},
        "scheduler": {"settings": {"feature_gates": feature}},
    }
    objects = render(helm, tmp_path, values)
    (hook,) = pod_hooks(objects)
    assert hook["clientConfig"]["service"]["path"] == "/pods/mutate"
    assert hook["rules"][0]["resources"] == ["pods"]
    assert hook["rules"][0]["operations"] == ["CREATE"]
    assert hook["matchConditions"] == [
        {
            "name": "caldera-scheduler-names",
            "expression": 'object.spec.schedulerName in ["volcano"]',
        }
    ]
    flag = f"--feature-gates={feature}"
    for component in ("scheduler", "webhook"):
        deployment = find(objects, "Deployment", f"{FULLNAME}-{component}")
        assert flag in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_command_webhooks_never_fail_open(helm: str, tmp_path: Path) -> None:
    """The Command webhooks (the requester's stamp and check on queue Commands) keep
    failurePolicy Fail and match Commands whatever objectSelector the values set; the namespace
    selectors, which only administrators control, apply to them as to the others."""
    admission = {
        "failurePolicy": "Ignore",
        "objectSelector": {"matchLabels": {"team": "a"}},
        "excludeNamespaces": ["monitoring"],
    }
    objects = render(helm, tmp_path, {"webhook": {"admission": admission}})
    hooks = {
        h["name"]: h
        for kind, suffix in (("Mutating", "mutate"), ("Validating", "validate"))
        for h in find(objects, f"{kind}WebhookConfiguration", f"{FULLNAME}-{suffix}")["webhooks"]
    }
    commands = {n: h for n, h in hooks.items() if n.endswith("command.caldera.io")}
    assert set(commands) == {"mutatecommand.caldera.io", "validatecommand.caldera.io"}
    assert commands["mutatecommand.caldera.io"]["rules"][0]["operations"] == ["CREATE"]
    assert commands["validatecommand.caldera.io"]["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    for hook in commands.values():
        assert hook["failurePolicy"] == "Fail"
        assert "objectSelector" not in hook
        assert hook["rules"][0]["resources"] == ["commands"]
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert set(expr["values"]) == {NAMESPACE, "kube-system", "monitoring"}
    others = [h for n, h in hooks.items() if n not in commands]
    assert all(h["failurePolicy"] == "Ignore" and "objectSelector" in h for h in others)


def test_priority_class_and_crd_check_rules(helm: str, tmp_path: Path) -> None:
    """Every process runs as system-cluster-critical by default (empty: none); the controllers
    may read exactly Caldera's CRDs and the scheduler the PodGroup and Queue CRDs (the start-up
    CRD check), nothing else of apiextensions."""
    objects = render(helm, tmp_path)
    for process in SETTINGS:
        pod = find(objects, "Deployment", f"{FULLNAME}-{process}")["spec"]["template"]["spec"]
        assert pod["priorityClassName"] == "system-cluster-critical"
    wanted = {
        # NodeShard's only with the sharding controller (off by default: docs/sharding.md);
        # Numatopology is read by the scheduler's numa-aware plugin alone, never checked at start
        "controllers": {c.info.resource for c in CRDS}
        - {NODESHARD.resource, NUMATOPOLOGY.resource},
        "scheduler": {PODGROUP.resource, QUEUE.resource},
        "webhook": set(),
    }
    for process, names in wanted.items():
        rules = find(objects, "ClusterRole", f"{FULLNAME}-{process}")["rules"]
        crd_rules = [r for r in rules if "apiextensions.k8s.io" in r["apiGroups"]]
        granted = {n for r in crd_rules for n in r["resourceNames"]}
        assert granted == names, process
        assert all(r["verbs"] == ["get"] for r in crd_rules)
    none = render(helm, tmp_path, {"scheduler": {"priorityClassName": ""}})
    pod = find(none, "Deployment", f"{FULLNAME}-scheduler")["spec"]["template"]["spec"]
    assert "priorityClassName" not in pod


def test_user_roles_aggregate_into_the_built_in_roles(helm: str, tmp_path: Path) -> None:
    """The editor and viewer ClusterRoles carry the aggregation labels of edit/admin/view (and
    Kubeflow's, unless turned off); rbac.userRoles.create=false leaves them out."""
    objects = render(helm, tmp_path)
    editor = find(objects, "ClusterRole", f"{FULLNAME}-vcjob-editor")
    viewer = find(objects, "ClusterRole", f"{FULLNAME}-vcjob-viewer")
    for role, wanted in (
        (editor, ("edit", "admin", "kubeflow-edit", "kubeflow-admin")),
        (viewer, ("view", "kubeflow-view")),
    ):
        labels = role["metadata"]["labels"]
        for name in wanted:
            domain = "kubeflow.org" if name.startswith("kubeflow") else "k8s.io"
            assert labels[f"rbac.authorization.{domain}/aggregate-to-{name}"] == "true"
    commands = next(r for r in editor["rules"] if r["apiGroups"] == ["bus.volcano.sh"])
    assert "create" in commands["verbs"]
    assert all(set(r["verbs"]) == {"get", "list", "watch"} for r in viewer["rules"])
    no_kubeflow = render(helm, tmp_path, {"rbac": {"userRoles": {"kubeflow": False}}})
    labels = find(no_kubeflow, "ClusterRole", f"{FULLNAME}-vcjob-editor")["metadata"]["labels"]
    assert not [k for k in labels if "kubeflow" in k]
    off = render(helm, tmp_path, {"rbac": {"userRoles": {"create": False}}})
    assert not [o for o in of_kind(off, "ClusterRole") if "vcjob" in o["metadata"]["name"]]


def test_visibility_api_is_registered_and_routed_to_the_leader(helm: str, tmp_path: Path) -> None:
    """By default: an APIService whose caBundle signed the Service's certificate, a Service
    that selects the scheduler pod labelled as leader (the scheduler may patch pods for it),
    the scheduler's front-proxy and SubjectAccessReview rights, its flags, and user roles
    aggregated into view, edit and admin with the queue lists open to every authenticated
    user. One replica: no label and no right to set it. Certificates from the webhook: left
    out (no certificate material in the render)."""
    objects = render(helm, tmp_path)
    api = find(objects, "APIService", "v1alpha1.visibility.caldera.dev")
    service = find(objects, "Service", f"{FULLNAME}-visibility")
    assert api["spec"]["service"] == {
        "namespace": NAMESPACE,
        "name": f"{FULLNAME}-visibility",
        "port": 443,
    }
    secret = find(objects, "Secret", f"{FULLNAME}-visibility-cert")
    assert api["spec"]["caBundle"] == secret["data"]["ca.crt"]
    assert service["spec"]["selector"]["scheduling.caldera.dev/visibility-leader"] == "true"
    assert service["spec"]["ports"][0]["targetPort"] == "visibility"
    scheduler = find(objects, "Deployment", f"{FULLNAME}-scheduler")
    settings = parsed_settings(scheduler)
    assert isinstance(settings, SchedulerSettings)
    assert settings.visibility is True
    assert settings.visibility_port == 8443
    assert settings.visibility_cert_file == "/etc/caldera/visibility/tls.crt"
    ports = {p["name"]: p["containerPort"] for p in container(scheduler)["ports"]}
    assert ports["visibility"] == 8443
    leader = find(objects, "Role", f"{FULLNAME}-visibility-leader")
    assert leader["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]
    reader = find(objects, "RoleBinding", f"{FULLNAME}-visibility-authentication-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    delegator = find(objects, "ClusterRoleBinding", f"{FULLNAME}-visibility-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    for name in ("pendingjobs-viewer", "queue-pendingjobs-viewer"):
        labels = find(objects, "ClusterRole", f"{FULLNAME}-{name}")["metadata"]["labels"]
        for role in ("view", "edit", "admin"):
            assert labels[f"rbac.authorization.k8s.io/aggregate-to-{role}"] == "true"
    everyone = find(objects, "ClusterRoleBinding", f"{FULLNAME}-queue-pendingjobs-viewer")
    assert everyone["subjects"][0]["name"] == "system:authenticated"

    one = render(helm, tmp_path, {"scheduler": {"replicas": 1}})
    selector = find(one, "Service", f"{FULLNAME}-visibility")["spec"]["selector"]
    assert "scheduling.caldera.dev/visibility-leader" not in selector
    assert not [r for r in of_kind(one, "Role") if "visibility" in r["metadata"]["name"]]

    made_by_webhook = render(helm, tmp_path, {"certificates": {"generator": "webhook"}})
    assert not of_kind(made_by_webhook, "APIService")
    off = render(helm, tmp_path, {"scheduler": {"visibility": {"enabled": False}}})
    assert not of_kind(off, "APIService")
    assert (
        "--visibility=true"
        not in container(find(off, "Deployment", f"{FULLNAME}-scheduler"))["args"]
    )


def test_prometheus_rule_is_the_alerts_file(helm: str, tmp_path: Path) -> None:
    """prometheusRule.enabled renders files/alerts.yaml as a PrometheusRule, with the extra
    labels on every alert beside its severity."""
    values = {
        "prometheusRule": {
            "enabled": True,
            "labels": {"release": "p"},
            "extraLabels": {"team": "ml"},
        }
    }
    objects = render(helm, tmp_path, values)
    rule = find(objects, "PrometheusRule", FULLNAME)
    assert rule["metadata"]["labels"]["release"] == "p"
    shipped = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    rendered = rule["spec"]["groups"][0]["rules"]
    assert [r["alert"] for r in rendered] == [r["alert"] for r in shipped["groups"][0]["rules"]]
    for got, want in zip(rendered, shipped["groups"][0]["rules"], strict=True):
        assert got["expr"] == want["expr"]
        assert got["labels"] == {**want["labels"], "team": "ml"}
    assert not of_kind(render(helm, tmp_path), "PrometheusRule")


def test_works_as_a_subchart_and_checks_kube_version(helm: str, tmp_path: Path) -> None:
    """A parent chart depending on Caldera's renders it with its values and a `global` map (the
    schema allows it); Kubernetes older than the chart's kubeVersion is refused."""
    parent = tmp_path / "platform"
    (parent / "charts").mkdir(parents=True)
    shutil.copytree(CHART, parent / "charts" / "caldera")
    (parent / "Chart.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v2",
                "name": "platform",
                "version": "1.0.0",
                "dependencies": [{"name": "caldera", "version": "0.1.0"}],
            }
        )
    )
    values = {
        "global": {"imageRegistry": "registry.example"},
        "caldera": {"scheduler": {"replicas": 1}},
    }
    (parent / "values.yaml").write_text(yaml.safe_dump(values))
    result = _run(
        [helm, "template", "plat", str(parent), f"--kube-version={TEMPLATE_KUBE_VERSION}"]
    )
    objects = [d for d in yaml.safe_load_all(result.stdout) if d]
    scheduler = find(objects, "Deployment", "plat-caldera-scheduler")
    assert scheduler["spec"]["replicas"] == 1
    old = _run([helm, "template", RELEASE, str(CHART), "--kube-version=1.26.0"], check=False)
    assert old.returncode != 0
    assert "kubeVersion" in old.stderr


def test_helm_test_pod_checks_every_process(helm: str, tmp_path: Path) -> None:
    """The `helm test` hook pod reads /readyz of each enabled process through its metrics
    Service and sends the webhook Service a review, trusting the CA of the certificate Secret;
    it runs files/helm_test.py with no API credentials."""
    objects = render(helm, tmp_path, {"scheduler": {"enabled": False}})
    pod = find(objects, "Pod", f"{FULLNAME}-test-answers")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["automountServiceAccountToken"] is False
    (test,) = pod["spec"]["containers"]
    assert test["command"][:2] == ["python", "-c"]
    assert test["command"][2] == (CHART / "files" / "helm_test.py").read_text()
    env = {e["name"]: e["value"] for e in test["env"]}
    assert env["CALDERA_READYZ_URLS"].split() == [
        f"http://{FULLNAME}-{p}-metrics.{NAMESPACE}.svc:8080/readyz"
        for p in ("controllers", "webhook")
    ]
    assert (
        env["CALDERA_WEBHOOK_URL"]
        == f"https://{FULLNAME}-webhook.{NAMESPACE}.svc:443/queues/mutate"
    )
    volume = pod["spec"]["volumes"][0]["secret"]
    assert volume["secretName"] == f"{FULLNAME}-webhook-cert"
    assert env["CALDERA_WEBHOOK_CA"].endswith("/ca.crt")


def test_certificate_sources(helm: str, tmp_path: Path) -> None:
    """generator=webhook renders no certificate material (two renders are identical, as ArgoCD
    needs) and the webhook's flags and rights to keep its own; existingSecret registers the
    given CA and mounts that Secret, and without a CA `helm template` stops with what to set."""
    webhook_made = {"certificates": {"generator": "webhook"}}
    objects = render(helm, tmp_path, webhook_made)
    assert objects == render(helm, tmp_path, webhook_made)
    assert not of_kind(objects, "Secret")
    hooks = [
        h
        for kind in ("Mutating", "Validating")
        for h in find(objects, f"{kind}WebhookConfiguration", f"{FULLNAME}-{kind.lower()[:-3]}e")[
            "webhooks"
        ]
    ]
    assert hooks
    assert all("caBundle" not in h["clientConfig"] for h in hooks)
    webhook = find(objects, "Deployment", f"{FULLNAME}-webhook")
    ws = parsed_settings(webhook)
    assert isinstance(ws, WebhookSettings)
    assert ws.cert_secret == f"{NAMESPACE}/{FULLNAME}-webhook-cert"
    assert f"{FULLNAME}-webhook.{NAMESPACE}.svc" in ws.cert_dns_names
    assert ws.webhook_configurations == (f"{FULLNAME}-mutate", f"{FULLNAME}-validate")
    assert ws.tls_cert_file.startswith("/tmp/")
    assert "volumes" not in webhook["spec"]["template"]["spec"] or all(
        "secret" not in v for v in webhook["spec"]["template"]["spec"]["volumes"]
    )
    role = find(objects, "Role", f"{FULLNAME}-webhook-cert")
    assert role["rules"][1]["resourceNames"] == [f"{FULLNAME}-webhook-cert"]
    cluster_role = find(objects, "ClusterRole", f"{FULLNAME}-webhook-cert")
    assert cluster_role["rules"][0]["resourceNames"] == list(ws.webhook_configurations)
    assert not [
        o
        for o in of_kind(render(helm, tmp_path), "Role")
        if o["metadata"]["name"].endswith("webhook-cert")
    ]

    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    mine = {"certificates": {"existingSecret": "corp-tls", "caBundle": ca}}
    objects = render(helm, tmp_path, mine)
    assert not of_kind(objects, "Secret")
    validating = find(objects, "ValidatingWebhookConfiguration", f"{FULLNAME}-validate")
    assert {h["clientConfig"]["caBundle"] for h in validating["webhooks"]} == {ca}
    webhook = find(objects, "Deployment", f"{FULLNAME}-webhook")
    volumes = {v["name"]: v for v in webhook["spec"]["template"]["spec"]["volumes"]}
    assert volumes["cert"]["secret"]["secretName"] == "corp-tls"
    test_pod = find(objects, "Pod", f"{FULLNAME}-test-answers")
    assert test_pod["spec"]["volumes"][0]["secret"]["secretName"] == "corp-tls"
    failed = _run(
        [
            helm,
            "template",
            RELEASE,
            str(CHART),
            f"--kube-version={TEMPLATE_KUBE_VERSION}",
            "--set",
            "certificates.existingSecret=corp-tls",
        ],
        check=False,
    )
    assert failed.returncode != 0
    assert "set certificates.caBundle" in failed.stderr


# ---- install into the cluster and RBAC through a job lifecycle --------------------------------


class Installed:
    """A release installed by the test, with the admin kubectl of the cluster."""

    def __init__(self, helm: str, cluster: Cluster, release: str, namespace: str) -> None:
        self.helm = helm
        self.cluster = cluster
        self.release = release
        self.namespace = namespace

    def helm_cmd(self, *args: str) -> list[str]:
        return [self.helm, f"--kubeconfig={self.cluster.kubeconfig}", "-n", self.namespace, *args]

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return run_kubectl(self.cluster.kubeconfig, *args, input=input)

    def token_kubeconfig(self, process: str, path: Path) -> Path:
        """A kubeconfig with a TokenRequest token of the chart's ServiceAccount for ``process``
        and the cluster (server, CA) of the admin kubeconfig."""
        sa = f"{self.release}-caldera-{process}"
        token = self.kubectl("-n", self.namespace, "create", "token", sa, "--duration=1h").strip()
        return write_token_kubeconfig(self.cluster.kubeconfig, path, user=sa, token=token)


@pytest.fixture
def installed(helm: str, cluster: Cluster, crds: Path, tmp_path: Path) -> Iterator[Installed]:
    """The chart installed in a fresh namespace, webhooks registered but matching nothing;
    always uninstalled (and the namespace deleted) afterwards."""
    release = f"e2e{secrets.token_hex(3)}"
    namespace = f"{release}-system"
    inst = Installed(helm, cluster, release, namespace)
    values = _values_file(tmp_path, NO_ADMISSION)
    try:
        _run(inst.helm_cmd("install", release, str(CHART), "--create-namespace", "-f", str(values)))
        yield inst
    finally:
        _run(inst.helm_cmd("uninstall", release, "--wait", "--timeout=60s"), check=False)
        _run(
            [
                kubectl(),
                f"--kubeconfig={cluster.kubeconfig}",
                "delete",
                "namespace",
                namespace,
                "--ignore-not-found",
                "--wait=false",
            ],
            check=False,
        )


def _job(name: str) -> dict[str, Any]:
    """A Volcano Job whose two pods kwok runs for 5 s and ends with exit code 0; with the svc,
    ssh and env plugins (so the controller writes ConfigMaps, Services, NetworkPolicies and
    Secrets) and a TTL (so the gc controller deletes it). No webhook runs, so the defaults the
    mutating webhook would add are written out."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": 2,
            "maxRetry": 3,
            "ttlSecondsAfterFinished": 2,
            "plugins": {"svc": [], "ssh": [], "env": []},
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 2,
                    "minAvailable": 2,
                    "maxRetry": 3,
                    "template": {
                        "metadata": {
                            "annotations": {
                                "kwok.caldera.io/exit-code": "0",
                                "kwok.caldera.io/run-for": "5s",
                            }
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "tolerations": [{"operator": "Exists"}],
                            "containers": [
                                {
                                    "name": "worker",
                                    "image": "busybox:1.36",
                                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def _ok(value: bool) -> bool | None:
    return True if value else None


async def test_install_and_rbac_through_a_job_lifecycle(
    installed: Installed, namespace: str, tmp_path: Path
) -> None:
    """helm install is accepted object by object; an upgrade keeps the webhook certificate; and
    the controllers, the scheduler and the webhook, each with only its chart ServiceAccount's
    token, take their Leases, sync their caches and carry a Job with plugins from creation to
    Completed and TTL deletion, start a CronJob's owed Job, and run a two-step JobFlow to
    Succeed and the deletion of its Jobs, without a single 403."""
    inst = installed
    manifest = _run(inst.helm_cmd("get", "manifest", inst.release)).stdout
    rendered = [d for d in yaml.safe_load_all(manifest) if d]
    kinds = {d["kind"] for d in rendered}
    assert {"Deployment", "ClusterRole", "Role", "MutatingWebhookConfiguration"} <= kinds
    # Every object of the release exists on the server (each in its own namespace: the
    # visibility API's RoleBinding sits in kube-system).
    found = inst.kubectl("get", "-f", "-", "-o", "name", input=manifest)
    assert len(found.split()) == len(rendered)

    # An upgrade reuses the generated certificate (lookup), so the caBundle stays valid.
    secret_name = f"{inst.release}-caldera-webhook-cert"
    before = json.loads(
        inst.kubectl("-n", inst.namespace, "get", "secret", secret_name, "-o", "json")
    )
    values = _values_file(tmp_path, NO_ADMISSION)
    _run(inst.helm_cmd("upgrade", inst.release, str(CHART), "-f", str(values)))
    after = json.loads(
        inst.kubectl("-n", inst.namespace, "get", "secret", secret_name, "-o", "json")
    )
    assert after["data"] == before["data"]
    mutating = json.loads(
        inst.kubectl(
            "get", "mutatingwebhookconfiguration", f"{inst.release}-caldera-mutate", "-o", "json"
        )
    )
    assert {h["clientConfig"]["caBundle"] for h in mutating["webhooks"]} == {
        before["data"]["ca.crt"]
    }

    # The three processes, locally, each as its ServiceAccount.
    lease_ns = f"--leader-election-namespace={inst.namespace}"
    cert_dir = tmp_path / "cert"
    cert_dir.mkdir()
    for key in ("tls.crt", "tls.key"):
        (cert_dir / key).write_bytes(base64.b64decode(before["data"][key]))
    webhook_port = free_port()
    procs = {
        "controllers": CalderaProcess(
            "controllers",
            [
                "--leader-elect=true",
                lease_ns,
                "--lease-duration=6",
                "--renew-deadline=4",
                "--retry-period=1",
            ],
            kubeconfig=inst.token_kubeconfig("controllers", tmp_path / "controllers.kubeconfig"),
            log_dir=tmp_path,
        ),
        "scheduler": CalderaProcess(
            "scheduler",
            [
                "--leader-elect=true",
                lease_ns,
                "--lease-duration=6",
                "--renew-deadline=4",
                "--retry-period=1",
                "--schedule-period=0.5",
            ],
            kubeconfig=inst.token_kubeconfig("scheduler", tmp_path / "scheduler.kubeconfig"),
            log_dir=tmp_path,
        ),
        "webhook": CalderaProcess(
            "webhook",
            [
                f"--port={webhook_port}",
                f"--tls-cert-file={cert_dir / 'tls.crt'}",
                f"--tls-key-file={cert_dir / 'tls.key'}",
            ],
            kubeconfig=inst.token_kubeconfig("webhook", tmp_path / "webhook.kubeconfig"),
            log_dir=tmp_path,
        ),
    }
    try:
        for name, proc in procs.items():
            await eventually(
                _ready(proc), timeout=60, what=f"{name} ready (caches synced as its ServiceAccount)"
            )
        for name in ("controllers", "scheduler"):
            await eventually(
                _leading(procs[name], f"caldera-{name}"),
                timeout=30,
                what=f"{name} leading (its Lease in {inst.namespace})",
            )

        # The chart's certificate serves the webhook: trusted through the caBundle's CA under
        # the Service's DNS name, as the API server will call it.
        service_dns = f"{inst.release}-caldera-webhook.{inst.namespace}.svc"
        ca_pem = base64.b64decode(before["data"]["ca.crt"])
        review = await _admission_review(procs["webhook"], webhook_port, ca_pem, service_dns)
        assert review["response"]["allowed"] is True, review
        assert review["response"]["patchType"] == "JSONPatch", review

        # The `helm test` pod's script, run here against the three processes: it passes, and
        # fails once one of them does not answer.
        ca_file = cert_dir / "ca.crt"
        ca_file.write_bytes(ca_pem)
        readyz = " ".join(f"http://127.0.0.1:{p.port}/readyz" for p in procs.values())
        checked = _helm_test_script(
            readyz, f"https://{service_dns}:443/queues/mutate", f"127.0.0.1:{webhook_port}", ca_file
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert checked.stdout.count(": 200") == 3
        assert "allowed=True" in checked.stdout
        dead = _helm_test_script(
            f"{readyz} http://127.0.0.1:{free_port()}/readyz",
            f"https://{service_dns}:443/queues/mutate",
            f"127.0.0.1:{webhook_port}",
            ca_file,
        )
        assert dead.returncode == 1, dead.stdout

        inst.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(_job("rbac")))
        # A yearly CronJob whose last run was two years ago owes one Job now: the cronjob
        # controller creates it and writes the CronJob's status with its ServiceAccount.
        inst.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(_cronjob("cron")))
        two_years_ago = format_time(dt.datetime.now(dt.UTC) - dt.timedelta(days=730))
        inst.kubectl(
            "-n",
            namespace,
            "patch",
            "cronjobs.batch.volcano.sh",
            "cron",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"lastScheduleTime": two_years_ago}}),
        )

        # A two-step JobFlow (delete policy): the jobflow controller creates both Jobs in
        # order, writes the flow's status and deletes the Jobs; the jobtemplate controller
        # writes the templates' status.
        for doc in _flow("flow"):
            inst.kubectl("-n", namespace, "create", "-f", "-", input=json.dumps(doc))

        async def cron_started() -> bool | None:
            _no_refusals(procs)
            active = inst.kubectl(
                "-n",
                namespace,
                "get",
                "cronjobs.batch.volcano.sh",
                "cron",
                "-o",
                "jsonpath={.status.active[*].name}",
            ).strip()
            return _ok(active.startswith("cron-"))

        await eventually(cron_started, timeout=60, what="the CronJob's Job and status")

        async def template_listed() -> bool | None:
            # While the flow's first Job exists (until the flow succeeded and deleted it).
            _no_refusals(procs)
            made = _jsonpath(inst, namespace, "jobtemplates.flow.volcano.sh", "flow-a", MADE)
            return _ok("flow-flow-a" in made)

        await eventually(template_listed, timeout=60, what="the JobTemplate's status")

        async def plugin_objects() -> bool | None:
            _no_refusals(procs)
            # Written by the controllers' ServiceAccount before the pods; the Job's TTL
            # removes them soon after it completes, so they are looked for now.
            names = inst.kubectl(
                "-n", namespace, "get", "configmaps,secrets,services,networkpolicies", "-o", "name"
            ).split()
            wanted = {"configmap/rbac-svc", "secret/rbac-ssh", "service/rbac"}
            return _ok(wanted <= set(names) and any("networkpolicy" in n for n in names))

        await eventually(plugin_objects, timeout=60, what="the plugins' objects")

        async def finished() -> str | None:
            _no_refusals(procs)
            phase = inst.kubectl(
                "-n",
                namespace,
                "get",
                "jobs.batch.volcano.sh",
                "rbac",
                "--ignore-not-found",
                "-o",
                "jsonpath={.status.state.phase}",
            ).strip()
            return phase if phase in ("Completed", "Failed", "Aborted", "Terminated") else None

        final = await eventually(finished, timeout=120, interval=0.3, what="the Job to finish")
        assert final == "Completed", _logs(procs)

        async def collected() -> bool | None:
            _no_refusals(procs)
            left = inst.kubectl(
                "-n", namespace, "get", "jobs.batch.volcano.sh", "--ignore-not-found", "-o", "name"
            )
            return _ok(left.strip() == "")

        await eventually(collected, timeout=60, what="the gc controller to delete the Job")

        async def flow_done() -> bool | None:
            _no_refusals(procs)
            phase = _jsonpath(inst, namespace, "jobflows.flow.volcano.sh", "flow", PHASE)
            left = inst.kubectl("-n", namespace, "get", "jobs.batch.volcano.sh", "-o", "name")
            return _ok(phase == "Succeed" and not left.split())

        await eventually(flow_done, timeout=120, interval=0.5, what="the JobFlow run and cleaned")
        for name, proc in procs.items():
            refused = proc.metric(
                "caldera_rest_client_requests_total", {"verb": "GET", "code": "403"}
            )
            assert refused is None, f"{name} was refused {refused} GETs"
    finally:
        codes = {name: proc.stop() for name, proc in procs.items()}
    logs = _logs(procs)
    _no_refusals(procs)
    assert codes == {"controllers": 0, "scheduler": 0, "webhook": 0}, logs


def _helm_test_script(
    readyz: str, webhook_url: str, connect: str, ca_file: Path
) -> subprocess.CompletedProcess[str]:
    """files/helm_test.py, as the `helm test` pod runs it, with local addresses."""
    env = {
        **os.environ,
        "CALDERA_READYZ_URLS": readyz,
        "CALDERA_WEBHOOK_URL": webhook_url,
        "CALDERA_WEBHOOK_CONNECT": connect,
        "CALDERA_WEBHOOK_CA": str(ca_file),
    }
    script = CHART / "files" / "helm_test.py"
    return subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, check=False
    )


async def test_people_bound_to_edit_run_jobs_and_commands(
    installed: Installed, namespace: str, tmp_path: Path
) -> None:
    """The chart's user roles aggregate into the built-in ones: a ServiceAccount bound to `edit`
    in a namespace creates a Volcano Job and a Command there with its own token, one bound to
    `view` reads them and is refused a create; and the chart's pods run at the critical
    priority."""
    inst = installed
    kubeconfigs: dict[str, Path] = {}
    for account, role in (("editor", "edit"), ("viewer", "view")):
        kubeconfigs[account] = bound_account_kubeconfig(
            inst.cluster.kubeconfig, namespace, account, role, tmp_path / f"{account}.kubeconfig"
        )

    def as_user(
        account: str, *args: str, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl(), f"--kubeconfig={kubeconfigs[account]}", "-n", namespace, *args],
            input=input,
            capture_output=True,
            text=True,
            check=False,
        )

    async def aggregated() -> bool | None:
        # The aggregation controller adds the rules to edit and view shortly after install.
        can = as_user("editor", "auth", "can-i", "create", "commands.bus.volcano.sh")
        sees = as_user("viewer", "auth", "can-i", "list", "jobs.batch.volcano.sh")
        return _ok(can.stdout.strip() == "yes" and sees.stdout.strip() == "yes")

    await eventually(aggregated, timeout=30, what="edit and view to aggregate the user roles")
    created = as_user("editor", "create", "-f", "-", input=json.dumps(_job("by-editor")))
    assert created.returncode == 0, created.stderr
    command = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"generateName": "by-editor-abortjob-"},
        "action": "AbortJob",
        "target": {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "name": "by-editor",
            "uid": "x",
        },
    }
    issued = as_user("editor", "create", "-f", "-", input=json.dumps(command))
    assert issued.returncode == 0, issued.stderr
    listed = as_user("viewer", "get", "jobs.batch.volcano.sh,commands.bus.volcano.sh", "-o", "name")
    assert listed.returncode == 0, listed.stderr
    assert "job.batch.volcano.sh/by-editor" in listed.stdout
    refused = as_user("viewer", "create", "-f", "-", input=json.dumps(_job("by-viewer")))
    assert refused.returncode != 0
    assert "forbidden" in refused.stderr

    async def critical() -> list[str] | None:
        priorities = inst.kubectl(
            "-n",
            inst.namespace,
            "get",
            "pods",
            f"-l=app.kubernetes.io/instance={inst.release}",
            "-o",
            "jsonpath={.items[*].spec.priority}",
        ).split()
        return priorities if len(priorities) == 6 else None

    priorities = await eventually(critical, timeout=60, what="the chart's six pods")
    assert set(priorities) == {"2000000000"}  # system-cluster-critical


async def test_pod_webhook_sees_only_pods_of_calderas_schedulers(
    helm: str, cluster: Cluster, crds: Path, namespace: str, tmp_path: Path
) -> None:
    """With webhook.admission.pods on, the API server calls /pods/validate only for pods of
    Caldera's schedulers: with no webhook pod running (and failurePolicy Fail) such a pod is
    refused while a pod of the default scheduler is admitted without the webhook."""
    release = f"pw{secrets.token_hex(3)}"
    inst = Installed(helm, cluster, release, f"{release}-system")
    values = {
        "controllers": {"enabled": False},
        "scheduler": {"enabled": False},
        "webhook": {
            "replicas": 1,
            "settings": {"enabled_admission": ["/pods/validate"]},
            "admission": {"pods": True},
        },
    }
    file = _values_file(tmp_path, values)
    _run(inst.helm_cmd("install", release, str(CHART), "--create-namespace", "-f", str(file)))
    try:

        def pod(scheduler: str) -> str:
            return json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"p-{scheduler}"},
                    "spec": {
                        "schedulerName": scheduler,
                        "containers": [{"name": "c", "image": "busybox"}],
                    },
                }
            )

        def dry_run(scheduler: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    kubectl(),
                    f"--kubeconfig={cluster.kubeconfig}",
                    "-n",
                    namespace,
                    "create",
                    "--dry-run=server",
                    "-f",
                    "-",
                ],
                input=pod(scheduler),
                capture_output=True,
                text=True,
                check=False,
            )

        plain = dry_run("default-scheduler")
        assert plain.returncode == 0, plain.stderr
        ours = dry_run("volcano")
        assert ours.returncode != 0
        assert 'failed calling webhook "validatepod.volcano.sh"' in ours.stderr
    finally:
        _run(inst.helm_cmd("uninstall", release, "--wait", "--timeout=60s"), check=False)
        inst.kubectl("delete", "namespace", inst.namespace, "--ignore-not-found", "--wait=false")


async def test_webhook_made_certificate_with_the_charts_rights(
    helm: str, cluster: Cluster, crds: Path, tmp_path: Path
) -> None:
    """Installed with certificates.generator=webhook, the webhook, with its ServiceAccount's
    token and the flags the chart gives it, writes its pair into the Secret and its CA into both
    webhook configurations without a 403; a `helm upgrade` keeps both."""
    release = f"wc{secrets.token_hex(3)}"
    inst = Installed(helm, cluster, release, f"{release}-system")
    values = _values_file(tmp_path, {**NO_ADMISSION, "certificates": {"generator": "webhook"}})
    _run(inst.helm_cmd("install", release, str(CHART), "--create-namespace", "-f", str(values)))
    proc: CalderaProcess | None = None
    try:
        manifest = _run(inst.helm_cmd("get", "manifest", release)).stdout
        rendered = [d for d in yaml.safe_load_all(manifest) if d]
        deployment = find(rendered, "Deployment", f"{release}-caldera-webhook")
        # The flags the chart gives for the certificate (the rest are the pod's ports, which
        # the local process replaces with free ones).
        chart_flags = [
            a
            for a in container(deployment)["args"]
            if a.startswith(("--cert-", "--webhook-configurations="))
        ]
        assert len(chart_flags) == 5, chart_flags  # with --cert-reload-interval
        proc = CalderaProcess(
            "webhook",
            [
                *chart_flags,
                f"--port={free_port()}",
                f"--tls-cert-file={tmp_path / 'own' / 'tls.crt'}",
                f"--tls-key-file={tmp_path / 'own' / 'tls.key'}",
            ],
            kubeconfig=inst.token_kubeconfig("webhook", tmp_path / "webhook.kubeconfig"),
            log_dir=tmp_path,
        )
        try:
            await eventually(_ready(proc), timeout=60, what="the webhook ready")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{proc.log()[-3000:]}") from None
        secret_name = f"{release}-caldera-webhook-cert"

        def state() -> tuple[dict[str, str], set[str]]:
            secret = json.loads(
                inst.kubectl("-n", inst.namespace, "get", "secret", secret_name, "-o", "json")
            )
            bundles = set()
            for kind, suffix in (("mutating", "mutate"), ("validating", "validate")):
                config = json.loads(
                    inst.kubectl(
                        "get",
                        f"{kind}webhookconfiguration",
                        f"{release}-caldera-{suffix}",
                        "-o",
                        "json",
                    )
                )
                bundles |= {h["clientConfig"].get("caBundle", "") for h in config["webhooks"]}
            return secret["data"], bundles

        data, bundles = state()
        assert bundles == {data["ca.crt"]}
        _run(inst.helm_cmd("upgrade", release, str(CHART), "-f", str(values)))
        assert state() == (data, bundles)
        _no_refusals({"webhook": proc})
    finally:
        code = proc.stop() if proc is not None else 0
        _run(inst.helm_cmd("uninstall", release, "--wait", "--timeout=60s"), check=False)
        inst.kubectl("delete", "namespace", inst.namespace, "--ignore-not-found", "--wait=false")
    assert code == 0


def _cronjob(name: str) -> dict[str, Any]:
    """A yearly CronJob of `_job`'s Job (which finishes and has a TTL)."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "0 0 1 1 *", "jobTemplate": {"spec": _job(name)["spec"]}},
    }


PHASE = ".status.state.phase"
MADE = ".status.jobDependsOnList"


def _jsonpath(inst: Installed, namespace: str, kind: str, name: str, path: str) -> str:
    return inst.kubectl("-n", namespace, "get", kind, name, "-o", f"jsonpath={{{path}}}").strip()


def _flow(name: str) -> list[dict[str, Any]]:
    """Two JobTemplates of `_job`'s spec (without its TTL) and a JobFlow running them one after
    the other, deleting its Jobs once it succeeded."""
    spec = {k: v for k, v in _job(name)["spec"].items() if k != "ttlSecondsAfterFinished"}
    templates = [
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobTemplate",
            "metadata": {"name": f"{name}-{step}"},
            "spec": spec,
        }
        for step in ("a", "b")
    ]
    flow = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": name},
        "spec": {
            "jobRetainPolicy": "delete",
            "flows": [
                {"name": f"{name}-a"},
                {"name": f"{name}-b", "dependsOn": {"targets": [f"{name}-a"]}},
            ],
        },
    }
    return [*templates, flow]


def _no_refusals(procs: dict[str, CalderaProcess]) -> None:
    """Fail at once when a process logged a 403 (its ServiceAccount lacks a permission)."""
    for name, proc in procs.items():
        text = proc.log()
        for line in text.splitlines():
            # Writes into another test's namespace while it is deleted are refused by the
            # NamespaceLifecycle admission plugin (403 too), not by RBAC.
            if "because it is being terminated" in line:
                continue
            # A whole "403" (not inside a timestamp, a port or an id) or the word forbidden.
            if re.search(r"\b403\b", line) or "forbidden" in line.lower():
                raise AssertionError(f"{name} was refused by RBAC:\n{line}\n\n{text[-3000:]}")


async def _admission_review(
    proc: CalderaProcess, port: int, ca_pem: bytes, server_name: str
) -> dict[str, Any]:
    """POST a Queue CREATE review to /queues/mutate over TLS verified against ``ca_pem`` for
    ``server_name``; the AdmissionReview answered."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "chart-q"},
        "spec": {},
    }
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "e2e-chart",
            "kind": {"group": "scheduling.volcano.sh", "version": "v1beta1", "kind": "Queue"},
            "resource": {
                "group": "scheduling.volcano.sh",
                "version": "v1beta1",
                "resource": "queues",
            },
            "name": "chart-q",
            "operation": "CREATE",
            "object": queue,
        },
    }
    url = f"https://127.0.0.1:{port}/queues/mutate"
    timeout = aiohttp.ClientTimeout(total=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, json=body, ssl=context, server_hostname=server_name) as response,
    ):
        assert response.status == 200, await response.text()
        answer: dict[str, Any] = await response.json()
    assert proc.proc.poll() is None
    return answer


def _ready(proc: CalderaProcess) -> Callable[[], Awaitable[bool | None]]:
    async def probe() -> bool | None:
        return _ok(proc.get("/readyz")[0] == 200)

    return probe


def _leading(proc: CalderaProcess, lease: str) -> Callable[[], Awaitable[bool | None]]:
    async def probe() -> bool | None:
        return _ok(proc.metric("caldera_leader_election_master_status", {"name": lease}) == 1.0)

    return probe


def _logs(procs: dict[str, CalderaProcess]) -> str:
    return "\n".join(f"--- {name}\n{p.log()[-3000:]}" for name, p in procs.items())
