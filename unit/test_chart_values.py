"""The Helm chart's values mirror the processes' settings, and its dashboard uses real metrics.

Every field of ControllersSettings, SchedulerSettings and WebhookSettings is either a key of the
process's ``settings:`` map in ``charts/caldera/values.yaml`` (same name, same default) or one of
the settings the chart decides itself, each with its reason below; ``values.schema.json`` allows
exactly those keys; ``docs/configuration.md`` names every one of them. The Grafana dashboard only
queries metric series that the code registers.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from caldera.kube.client import ClientMetrics
from caldera.obs.metrics import ControllerMetrics, new_registry
from caldera.settings import (
    ControllersSettings,
    ProcessSettings,
    SchedulerSettings,
    WebhookSettings,
)
from controllers.jobflow.metrics import JobFlowMetrics
from controllers.queue.metrics import QueueMetrics
from informers.metrics import InformerMetrics, WorkQueueMetrics
from scheduler.conf import DEFAULT_CONF, SchedulerConf, parse_conf
from scheduler.metrics import SchedulerMetrics
from scheduler.registry import REGISTRY
from webhooks.server import WebhookMetrics

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "caldera"
CONFIGURATION_DOC = REPO / "docs" / "configuration.md"

PROCESSES: dict[str, type[ProcessSettings]] = {
    "controllers": ControllersSettings,
    "scheduler": SchedulerSettings,
    "webhook": WebhookSettings,
}

_IN_CLUSTER = "the chart runs the process in-cluster: its ServiceAccount token, no kubeconfig"
_CERT_MOUNT = "the chart mounts the serving certificate's Secret and points the flag at it"
_VISIBILITY = (
    "set by scheduler.visibility.enabled (the APIService, its Service and serving certificate)"
)
_WEBHOOK_NO_LEASE = "unused by the webhook: replicas are active-active, no leader election"
_CERT_SOURCE = (
    "set by certificates.generator=webhook (the Secret, the Service's names, "
    "the chart's configurations)"
)

# Settings that are not values, and why. docs/configuration.md repeats each reason.
CHART_MANAGED: dict[str, dict[str, str]] = {
    "controllers": {
        "kubeconfig": _IN_CLUSTER,
        "context": _IN_CLUSTER,
        "network_topology_discovery": "the chart renders controllers.networkTopologyDiscovery "
        "into a ConfigMap, mounts it and points the flag at it",
    },
    "scheduler": {
        "kubeconfig": _IN_CLUSTER,
        "context": _IN_CLUSTER,
        "scheduler_conf": "the chart mounts scheduler.conf (a ConfigMap) and points the flag at it",
        "visibility": _VISIBILITY,
        "visibility_port": _VISIBILITY,
        "visibility_cert_file": _VISIBILITY,
        "visibility_key_file": _VISIBILITY,
    },
    "webhook": {
        "kubeconfig": _IN_CLUSTER,
        "context": _IN_CLUSTER,
        "tls_cert_file": _CERT_MOUNT,
        "tls_key_file": _CERT_MOUNT,
        "leader_elect": _WEBHOOK_NO_LEASE,
        "leader_election_namespace": _WEBHOOK_NO_LEASE,
        "leader_election_id": _WEBHOOK_NO_LEASE,
        "lease_duration": _WEBHOOK_NO_LEASE,
        "renew_deadline": _WEBHOOK_NO_LEASE,
        "retry_period": _WEBHOOK_NO_LEASE,
        "cert_secret": _CERT_SOURCE,
        "cert_dns_names": _CERT_SOURCE,
        "cert_validity_days": _CERT_SOURCE,
        "webhook_configurations": _CERT_SOURCE,
    },
}

# Values whose default differs from the process's, and why.
DIFFERENT_DEFAULTS: dict[tuple[str, str], str] = {
    (p, "log_format"): "a pod's stderr is no terminal, so auto means json anyway; said outright"
    for p in PROCESSES
}


def _values() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CHART / "values.yaml").read_text())
    return data


def _schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    return data


def _fields(process: str) -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(PROCESSES[process])}


@pytest.mark.parametrize("process", PROCESSES)
def test_every_setting_is_a_value_or_chart_managed(process: str) -> None:
    """No setting is forgotten by the chart, none is both a value and chart-managed, and every
    key of values.yaml is a real setting (a typo would become an unknown flag)."""
    fields = set(_fields(process))
    keys = set(_values()[process]["settings"])
    managed = set(CHART_MANAGED[process])
    assert keys <= fields, f"values.yaml {process}.settings has unknown keys {keys - fields}"
    assert not keys & managed, f"chart-managed settings also in values.yaml: {keys & managed}"
    assert fields - keys - managed == set(), (
        f"settings of {process} with neither a value nor a reason: {fields - keys - managed}"
    )


@pytest.mark.parametrize("process", PROCESSES)
def test_value_defaults_are_the_process_defaults(process: str) -> None:
    """A value left at its default behaves as the flag left out (unless a reason says why)."""
    fields = _fields(process)
    for key, value in _values()[process]["settings"].items():
        if (process, key) in DIFFERENT_DEFAULTS:
            continue
        default = fields[key].default
        if isinstance(default, tuple):
            # An empty list means "the process default" in the chart (no flag is rendered).
            assert value == [] or tuple(value) == default, (process, key, value, default)
        elif isinstance(default, bool):
            assert value is default, (process, key, value, default)
        else:
            assert value == default, (process, key, value, default)
            assert type(value) is type(default) or isinstance(default, float), (process, key)


@pytest.mark.parametrize("process", PROCESSES)
def test_schema_allows_exactly_the_values_settings(process: str) -> None:
    """values.schema.json refuses unknown settings and knows every one values.yaml sets."""
    settings_schema = _schema()["properties"][process]["properties"]["settings"]
    assert settings_schema["additionalProperties"] is False
    assert set(settings_schema["properties"]) == set(_values()[process]["settings"])
    for key, prop in settings_schema["properties"].items():
        assert "null" in prop["type"], f"{process}.settings.{key}: null must mean the default"


def test_configuration_doc_names_every_setting_and_reason() -> None:
    """docs/configuration.md documents each value's flag and each chart-managed setting."""
    doc = CONFIGURATION_DOC.read_text()
    missing: list[str] = []
    for process in PROCESSES:
        for key in _values()[process]["settings"]:
            if f"`{process}.settings.{key}`" not in doc:
                missing.append(f"{process}.settings.{key}")
            flag = "--" + key.replace("_", "-")
            if f"`{flag}`" not in doc:
                missing.append(flag)
        for key in CHART_MANAGED[process]:
            if f"`--{key.replace('_', '-')}`" not in doc:
                missing.append(f"{process}: --{key.replace('_', '-')} (chart-managed)")
    assert missing == []


def _exported_series() -> set[str]:
    """Every series name the processes' metric families produce (counters end in _total,
    histograms in _bucket/_sum/_count), from the real metric classes."""
    registry = new_registry()
    ControllerMetrics(registry)
    ClientMetrics(registry)
    WorkQueueMetrics(registry)
    InformerMetrics(registry)
    QueueMetrics(registry)
    JobFlowMetrics(registry)
    SchedulerMetrics(registry)
    WebhookMetrics(registry)
    names: set[str] = set()
    assert isinstance(registry, CollectorRegistry)
    for family in registry.collect():
        names.update(sample.name for sample in family.samples)
        if family.type in ("gauge", "unknown"):
            names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
    # Registered inside functions that need a running process; named here from their source.
    source = (REPO / "caldera" / "process.py").read_text()
    assert '"caldera_leader_election_master_status"' in source
    names.add("caldera_leader_election_master_status")
    return names


def test_dashboard_queries_only_exported_metrics() -> None:
    """Each caldera_* series in the Grafana dashboard is one the code exports."""
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    used: set[str] = set()
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            used.update(re.findall(r"\bcaldera_[a-z0-9_]+", target["expr"]))
    assert used, "the dashboard queries no Caldera metric"
    unknown = used - _exported_series()
    assert unknown == set(), f"the dashboard queries series nobody exports: {sorted(unknown)}"


def test_dashboard_covers_the_issue_panels() -> None:
    """The panels the operators asked for are there."""
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    titles = [panel["title"].lower() for panel in dashboard["panels"]]
    for wanted in (
        "scheduling latency",
        "pods bound",
        "unschedulable gangs",
        "deserved vs allocated",
        "job phases",
        "work queue depth",
        "webhook latency",
        "jobflows finished",
        "workflow controllers",
        "deserved vs allocated (gpu)",
        "deserved vs allocated (memory)",
        "job wait time",
        "gpu sharing",
    ):
        assert any(wanted in t for t in titles), wanted
    heatmaps = [p for p in dashboard["panels"] if p["type"] == "heatmap"]
    assert [p["title"] for p in heatmaps] == ["Job wait time (PodGroup creation to binds)"]
    assert heatmaps[0]["targets"][0]["format"] == "heatmap"


def test_dashboard_variables_filter_every_query() -> None:
    """The namespace, instance and queue variables exist, and every caldera_* selector of every
    panel is filtered by namespace and instance (and the per-queue series by queue)."""
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert {"datasource", "namespace", "instance", "queue"} <= set(variables)
    for name in ("namespace", "instance", "queue"):
        assert variables[name]["includeAll"] is True
        assert variables[name]["allValue"] == ".*"  # matches series without the label too
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name, matchers in re.findall(r"\b(caldera_[a-z0-9_]+)(\{[^}]*\})?", target["expr"]):
                where = (panel["title"], name)
                assert 'namespace=~"$namespace"' in matchers, where
                assert 'instance=~"$instance"' in matchers, where
                if name.startswith("caldera_queue_"):
                    assert 'queue_name=~"$queue"' in matchers, where


def test_scheduler_conf_default_is_what_volcanos_chart_installs() -> None:
    """The chart's scheduler configuration is Volcano's Helm chart's
    (installer/helm/chart/volcano/config/volcano-scheduler.conf): the one the scheduler uses
    without a file, plus binpack in the last tier, with gang and drf out of preemption votes."""

    def parsed(text: str) -> SchedulerConf:
        return parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)

    chart, builtin = parsed(_values()["scheduler"]["conf"]), parsed(DEFAULT_CONF)
    assert chart.actions == builtin.actions
    names = [[p.name for p in tier] for tier in builtin.tiers]
    names[-1].append("binpack")
    assert [[p.name for p in tier] for tier in chart.tiers] == names
    switched = {p.name: dict(p.switches) for tier in chart.tiers for p in tier if p.switches}
    assert switched == {"gang": {"enablePreemptable": False}, "drf": {"enablePreemptable": False}}
    assert all(not p.arguments for tier in chart.tiers for p in tier)


def _alert_rules() -> list[dict[str, Any]]:
    data = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    (group,) = data["groups"]
    rules: list[dict[str, Any]] = group["rules"]
    return rules


def test_alerts_query_only_exported_metrics() -> None:
    """Every caldera_* series an alert reads is one the code exports, and each alert has a
    severity, a summary and a description."""
    exported = _exported_series()
    for rule in _alert_rules():
        used = set(re.findall(r"\bcaldera_[a-z0-9_]+", rule["expr"]))
        assert used, rule["alert"]
        assert used <= exported, (rule["alert"], used - exported)
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]
        assert rule["annotations"]["description"]


def test_operations_doc_lists_the_shipped_alerts() -> None:
    """docs/operations.md's alert table is the chart's rules: same names, expressions, waits
    and severities, in the same order."""
    doc = (REPO / "docs" / "operations.md").read_text()
    rows = re.findall(r"^\| `(Caldera\w+)` \| `(.+?)` \| (\S+) \| (\w+) \|", doc, re.MULTILINE)
    shipped = [
        (r["alert"], r["expr"], r.get("for", "-"), r["labels"]["severity"]) for r in _alert_rules()
    ]
    assert rows == shipped
