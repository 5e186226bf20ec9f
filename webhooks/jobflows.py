"""Admission of Volcano JobFlows (``/jobflows/validate``, CREATE and UPDATE), as Volcano's
pkg/webhooks/admission/jobflows/validate, plus the checks Caldera adds.

Volcano's check, with its wording: the flows' dependencies must form a DAG. A target naming no
flow is refused with "jobflow Flow is not DAG: vertex is not defined: <target>", a cycle with
"jobflow Flow is not DAG". Caldera names where each undefined target is written, every one of
them, and the cycle it found ("jobflow Flow is not DAG: the dependencies form a cycle: a -> b ->
a"; ``a -> b``: a waits for b). Repeated flow names and an empty ``flows`` are allowed, as in
Volcano.

Caldera's additions refuse only JobFlows whose Jobs could never be created: a flow name that
cannot be a JobTemplate's name (a DNS-1123 subdomain); a Job name ``<jobflow>-<flow>`` that is not
a valid object name; and a ``volcano.sh/createdByJobFlow`` or ``createdByJobTemplate`` label value
(``<namespace>.<name>``) longer than the 63 characters a label value may have. An empty flow name
and a ``jobRetainPolicy`` other than retain or delete are refused as the CRD would refuse them
(for API servers with an older CRD).

Probes (``dependsOn.probe``) and ``patch`` are admitted with a warning (``kubectl`` prints it):
no controller acts on them, Volcano's included.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from caldera.api.fielderrors import invalid, required, unsupported
from caldera.api.flow import (
    CREATED_BY_JOB_FLOW_KEY,
    CREATED_BY_JOB_TEMPLATE_KEY,
    JobFlow,
    RetainPolicy,
    flow_job_name,
    object_string,
)
from caldera.api.flowgraph import find_cycle, graph_of, undefined
from caldera.api.limits import jobflow_limit_errors
from caldera.api.names import dns1123_subdomain, go_list

__all__ = ["NOT_DAG", "FlowReview", "review_jobflow"]

NOT_DAG: Final = "jobflow Flow is not DAG"
LABEL_VALUE_MAX: Final = 63
_POLICIES: Final = tuple(p.value for p in RetainPolicy)


@dataclass(frozen=True, slots=True)
class FlowReview:
    """Why a JobFlow is refused ("" when admitted), and the warnings for an admitted one."""

    message: str
    warnings: tuple[str, ...] = ()


def _dag_errors(jobflow: JobFlow) -> list[str]:
    errors = [
        f"{NOT_DAG}: vertex is not defined: {u.target} ({u.path})"
        for u in undefined(jobflow.spec.flows)
    ]
    cycle = find_cycle(graph_of(jobflow.spec.flows))
    if cycle is not None:
        errors.append(
            f"{NOT_DAG}: the dependencies form a cycle: {' -> '.join(cycle)} "
            "(spec.flows[].dependsOn.targets, where a -> b means a waits for b)"
        )
    return errors


def _label_error(path: str, value: object, key: str, label: str) -> list[str]:
    if len(label) <= LABEL_VALUE_MAX:
        return []
    return [
        invalid(
            path,
            value,
            f"its Jobs' label {key}={label} would be {len(label)} characters, "
            f"more than the {LABEL_VALUE_MAX} a label value may have",
        )
    ]


def _name_errors(jobflow: JobFlow) -> list[str]:
    namespace, name = jobflow.metadata.namespace, jobflow.metadata.name
    errors = _label_error(
        "metadata.name", name, CREATED_BY_JOB_FLOW_KEY, object_string(namespace, name)
    )
    for i, flow in enumerate(jobflow.spec.flows):
        path = f"spec.flows[{i}].name"
        if not flow.name:
            errors.append(required(path, "the name of a JobTemplate"))
            continue
        problems = dns1123_subdomain(flow.name)
        if problems:
            errors.append(invalid(path, flow.name, f"a JobTemplate name: {go_list(problems)}"))
            continue
        job = flow_job_name(name, flow.name)
        problems = dns1123_subdomain(job)
        if problems:
            errors.append(invalid(path, flow.name, f"its Job {job}: {go_list(problems)}"))
        template = object_string(namespace, flow.name)
        errors += _label_error(path, flow.name, CREATED_BY_JOB_TEMPLATE_KEY, template)
    return errors


def _warnings(jobflow: JobFlow) -> tuple[str, ...]:
    warnings = []
    for i, flow in enumerate(jobflow.spec.flows):
        if flow.depends_on is not None and flow.depends_on.probe is not None:
            warnings.append(
                f"spec.flows[{i}].dependsOn.probe: not acted on (nor by Volcano): the flow "
                "waits for its targets only"
            )
        if flow.patch is not None:
            warnings.append(
                f"spec.flows[{i}].patch: not applied (nor by Volcano): the Job is the "
                f"JobTemplate {flow.name!r} as it is"
            )
    return tuple(warnings)


def review_jobflow(jobflow: JobFlow) -> FlowReview:
    """Why ``jobflow`` is refused (on CREATE and UPDATE alike), or its warnings."""
    bounds = jobflow_limit_errors(jobflow.spec.flows)
    if bounds:
        return FlowReview("; ".join(bounds))
    errors = _dag_errors(jobflow)
    policy = jobflow.spec.job_retain_policy
    if policy and policy not in _POLICIES:
        errors.append(unsupported("spec.jobRetainPolicy", policy, _POLICIES))
    errors += _name_errors(jobflow)
    if errors:
        return FlowReview("; ".join(errors))
    return FlowReview("", _warnings(jobflow))
