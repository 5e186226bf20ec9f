"""The small DRA cases ``bench/dra.py --only cases`` gives kube-scheduler and Caldera alike:
device counts, ``allocationMode: All``, CEL selectors on attributes and capacity,
``matchAttribute`` constraints, ``firstAvailable``, two claims in a pod, a claim shared by two
pods, and a node that fits only some pods. Each case has nodes of its own (labelled
``caldera.io/dra-case``, its pods select them) with the fake driver's GPUs, and says in Python
what each request accepts (the validity check evaluates no CEL; a predicate that disagreed with
its CEL would show as kube-scheduler's allocations judged invalid).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from bench._dra_check import Device, Json
from caldera.api.quantity import parse_quantity
from e2e.dra_kinds import API_VERSION
from e2e.fake_dra_driver import DRIVER, NodeGpus

CASE_LABEL: Final = "caldera.io/dra-case"
CLASS: Final = DRIVER  # the fake driver's DeviceClass is named after it
ATTRS: Final = f'device.attributes["{DRIVER}"]'


@dataclass(frozen=True)
class PodSpec:
    """A pod of a case: its claims, each from a template or naming a claim of the case."""

    name: str
    templates: Mapping[str, str] = field(default_factory=dict)  # pod claim -> template
    claims: Mapping[str, str] = field(default_factory=dict)  # pod claim -> ResourceClaim


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    nodes: Mapping[str, NodeGpus]  # node suffix -> its GPUs
    requests: Mapping[str, list[Json]]  # template or claim name -> its device requests
    pods: tuple[PodSpec, ...]
    shared: tuple[str, ...] = ()  # names in ``requests`` made as ResourceClaims, not templates
    constraints: Mapping[str, list[Json]] = field(default_factory=dict)
    accepts: Mapping[str, Callable[[Device], bool]] = field(default_factory=dict)

    def node_names(self) -> list[str]:
        return [f"{self.name}-{suffix}" for suffix in self.nodes]

    def layouts(self) -> dict[str, NodeGpus]:
        return {f"{self.name}-{suffix}": gpus for suffix, gpus in self.nodes.items()}

    def accept(self, request: str, device: Device) -> bool:
        """Whether ``request`` ("<request>" or "<request>/<subrequest>") takes ``device``."""
        if device.driver != DRIVER:
            return False
        check = self.accepts.get(request) or self.accepts.get(request.split("/")[0])
        return check(device) if check else True


def exactly(name: str, count: int = 1, *, cel: str | None = None, mode: str | None = None) -> Json:
    """One device request of the fake GPUs' class."""
    body: Json = {"deviceClassName": CLASS}
    if mode == "All":
        body["allocationMode"] = "All"
    else:
        body["count"] = count
    if cel:
        body["selectors"] = [{"cel": {"expression": cel}}]
    return {"name": name, "exactly": body}


def _model_is(model: str) -> Callable[[Device], bool]:
    return lambda d: d.attributes.get("model") == model


def _memory_at_least(quantity: str) -> Callable[[Device], bool]:
    return lambda d: parse_quantity(d.capacity.get("memory", "0")) >= parse_quantity(quantity)


EIGHT = NodeGpus()
MIXED = NodeGpus(models=("FakeGPU-A", "FakeGPU-B"))  # gpu-0..3 A, gpu-4..7 B

CASES: Final[tuple[Case, ...]] = (
    Case(
        "count-2",
        "two devices of one claim",
        {"n0": EIGHT},
        {"two": [exactly("gpu", 2)]},
        (PodSpec("p", templates={"gpu": "two"}),),
    ),
    Case(
        "count-9",
        "nine devices where a node has eight (fits nowhere)",
        {"n0": EIGHT},
        {"nine": [exactly("gpu", 9)]},
        (PodSpec("p", templates={"gpu": "nine"}),),
    ),
    Case(
        "all",
        "allocationMode All on a node of four",
        {"n0": NodeGpus(gpus=4)},
        {"every": [exactly("gpu", mode="All")]},
        (PodSpec("p", templates={"gpu": "every"}),),
    ),
    Case(
        "selector-model",
        "a CEL selector on the model attribute, one node of each model",
        {"a": NodeGpus(models=("FakeGPU-A",)), "b": NodeGpus(models=("FakeGPU-B",))},
        {"b2": [exactly("gpu", 2, cel=f'{ATTRS}.model == "FakeGPU-B"')]},
        (PodSpec("p", templates={"gpu": "b2"}),),
        accepts={"gpu": _model_is("FakeGPU-B")},
    ),
    Case(
        "selector-memory",
        "a CEL selector on the memory capacity, nodes of 40Gi and 80Gi",
        {"small": NodeGpus(memory="40Gi"), "big": NodeGpus(memory="80Gi")},
        {
            "big": [
                exactly(
                    "gpu",
                    1,
                    cel=f'device.capacity["{DRIVER}"].memory.compareTo(quantity("60Gi")) >= 0',
                )
            ]
        },
        (PodSpec("p", templates={"gpu": "big"}),),
        accepts={"gpu": _memory_at_least("60Gi")},
    ),
    Case(
        "selector-none",
        "a CEL selector no device matches",
        {"n0": EIGHT},
        {"none": [exactly("gpu", 1, cel=f'{ATTRS}.model == "NoSuchGPU"')]},
        (PodSpec("p", templates={"gpu": "none"}),),
        accepts={"gpu": _model_is("NoSuchGPU")},
    ),
    Case(
        "constraint-4",
        "four devices with matchAttribute model on a node of 4 A + 4 B",
        {"n0": MIXED},
        {"four": [exactly("gpu", 4)]},
        (PodSpec("p", templates={"gpu": "four"}),),
        constraints={"four": [{"matchAttribute": f"{DRIVER}/model"}]},
    ),
    Case(
        "constraint-5",
        "five devices with matchAttribute model on a node of 4 A + 4 B (fits nowhere)",
        {"n0": MIXED},
        {"five": [exactly("gpu", 5)]},
        (PodSpec("p", templates={"gpu": "five"}),),
        constraints={"five": [{"matchAttribute": f"{DRIVER}/model"}]},
    ),
    Case(
        "constraint-two-requests",
        "one A-model device and one more, matchAttribute model across both requests",
        {"n0": MIXED},
        {
            "pair": [
                exactly("first", 1, cel=f'{ATTRS}.model == "FakeGPU-A"'),
                exactly("second", 1),
            ]
        },
        (PodSpec("p", templates={"gpu": "pair"}),),
        constraints={
            "pair": [{"requests": ["first", "second"], "matchAttribute": f"{DRIVER}/model"}]
        },
        accepts={"first": _model_is("FakeGPU-A")},
    ),
    Case(
        "first-available",
        "firstAvailable: nine devices (none has them), else two",
        {"n0": EIGHT},
        {
            "prio": [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": "nine", "deviceClassName": CLASS, "count": 9},
                        {"name": "two", "deviceClassName": CLASS, "count": 2},
                    ],
                }
            ]
        },
        (PodSpec("p", templates={"gpu": "prio"}),),
    ),
    Case(
        "two-claims",
        "a pod with two claims of three devices each on a node of eight",
        {"n0": EIGHT},
        {"three": [exactly("gpu", 3)]},
        (PodSpec("p", templates={"a": "three", "b": "three"}),),
    ),
    Case(
        "shared-claim",
        "one ResourceClaim of two devices used by two pods",
        {"n0": EIGHT, "n1": EIGHT},
        {"shared": [exactly("gpu", 2)]},
        (PodSpec("p0", claims={"gpu": "shared"}), PodSpec("p1", claims={"gpu": "shared"})),
        shared=("shared",),
    ),
    Case(
        "fill-node",
        "three pods of three devices each on one node of eight (two fit)",
        {"n0": EIGHT},
        {"three": [exactly("gpu", 3)]},
        tuple(PodSpec(f"p{i}", templates={"gpu": "three"}) for i in range(3)),
    ),
)


def _spec(case: Case, name: str) -> Json:
    devices: Json = {"requests": case.requests[name]}
    if name in case.constraints:
        devices["constraints"] = case.constraints[name]
    return {"devices": devices}


def objects(case: Case) -> list[Json]:
    """The case's ResourceClaimTemplates and ResourceClaims (names prefixed by the case)."""
    made: list[Json] = []
    for name in case.requests:
        meta = {"name": f"{case.name}-{name}"}
        if name in case.shared:
            made.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": "ResourceClaim",
                    "metadata": meta,
                    "spec": _spec(case, name),
                }
            )
        else:
            made.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": "ResourceClaimTemplate",
                    "metadata": meta,
                    "spec": {"spec": _spec(case, name)},
                }
            )
    return made


def pods(case: Case, scheduler: str, annotations: Callable[[str], dict[str, str]]) -> list[Json]:
    """The case's pods for ``scheduler``, held to the case's nodes; ``annotations(pod name)``
    adds what that scheduler needs (Caldera's PodGroup)."""
    made: list[Json] = []
    for spec in case.pods:
        name = f"{case.name}-{spec.name}"
        refs: list[Json] = [
            {"name": ref, "resourceClaimTemplateName": f"{case.name}-{template}"}
            for ref, template in spec.templates.items()
        ]
        refs += [
            {"name": ref, "resourceClaimName": f"{case.name}-{claim}"}
            for ref, claim in spec.claims.items()
        ]
        made.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "annotations": annotations(name),
                    "labels": {CASE_LABEL: case.name},
                },
                "spec": {
                    "schedulerName": scheduler,
                    "nodeSelector": {CASE_LABEL: case.name},
                    "tolerations": [{"operator": "Exists"}],
                    "resourceClaims": refs,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"claims": [{"name": r["name"]} for r in refs]},
                        }
                    ],
                },
            }
        )
    return made


def case_of(pod: Json) -> str:
    labels: dict[str, Any] = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(CASE_LABEL, ""))
