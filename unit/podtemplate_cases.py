"""Pod templates Kubernetes refuses, with the field errors the API server gives for them.

Shared by unit/test_podtemplate.py (Caldera's pure checks give exactly these errors) and
e2e/test_podtemplate_rules.py (the real API server gives them too, for a PodTemplate created
with dryRun: Kubernetes' ValidatePodTemplate is the rule Volcano's webhook applies).
Paths start at ``template``, as the API server names a PodTemplate's fields.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Case(NamedTuple):
    id: str
    spec: dict[str, Any]
    errors: list[str]
    server: bool = True  # False: the API server refuses it while decoding (400), no field list


def c(name: str = "main", **extra: Any) -> dict[str, Any]:
    """A valid container, with `extra` fields merged in."""
    return {"name": name, "image": "busybox:1.36", **extra}


def res(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> Any:
    out: dict[str, Any] = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return {"resources": out}


C0 = "template.spec.containers[0]"
GT0 = "must be greater than or equal to 0"
LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

CASES: list[Case] = [
    Case("valid", {"containers": [c(**res({"cpu": "1"}, {"cpu": "2"}))]}, []),
    Case("no containers", {"containers": []}, ["template.spec.containers: Required value"]),
    Case(
        "negative cpu request",
        {"containers": [c(**res({"cpu": "-1"}))]},
        [f'{C0}.resources.requests[cpu]: Invalid value: "-1": {GT0}'],
    ),
    Case(
        "negative memory request",
        {"containers": [c(**res({"memory": "-1"}))]},
        [f'{C0}.resources.requests[memory]: Invalid value: "-1": {GT0}'],
    ),
    Case(
        "negative limit",
        {"containers": [c(**res(limits={"memory": "-1Gi"}))]},
        [f'{C0}.resources.limits[memory]: Invalid value: "-1Gi": {GT0}'],
    ),
    Case(
        "request above limit",
        {"containers": [c(**res({"cpu": "2"}, {"cpu": "1"}))]},
        [
            f'{C0}.resources.requests: Invalid value: "2": must be less than or equal to cpu '
            "limit of 1"
        ],
    ),
    Case(
        "extended resource fraction",
        {"containers": [c(**res({"nvidia.com/gpu": "500m"}, {"nvidia.com/gpu": "500m"}))]},
        [
            f'{C0}.resources.requests[nvidia.com/gpu]: Invalid value: "500m": must be an integer',
            f'{C0}.resources.limits[nvidia.com/gpu]: Invalid value: "500m": must be an integer',
        ],
    ),
    Case(
        "extended resource request differs from limit",
        {"containers": [c(**res({"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}))]},
        [
            f'{C0}.resources.requests: Invalid value: "1": must be equal to '
            "nvidia.com/gpu limit of 2"
        ],
    ),
    Case(
        "extended resource without limit",
        {"containers": [c(**res({"nvidia.com/gpu": "1"}))]},
        [
            f"{C0}.resources.limits: Required value: Limit must be set for non overcommitable "
            "resources"
        ],
    ),
    Case(
        "bad quantity",
        {"containers": [c(**res({"cpu": "one"}))]},
        [f"{C0}.resources.requests[cpu]: Invalid value: \"one\": invalid quantity 'one'"],
        server=False,
    ),
    Case("no name", {"containers": [c("")]}, [f"{C0}.name: Required value"]),
    Case("bad name", {"containers": [c("Main")]}, [f'{C0}.name: Invalid value: "Main": {LABEL}']),
    Case(
        "duplicate name",
        {"containers": [c("a"), c("a")]},
        ['template.spec.containers[1].name: Duplicate value: "a"'],
    ),
    Case(
        "init container duplicates a container",
        {"containers": [c("a")], "initContainers": [c("a")]},
        ['template.spec.initContainers[0].name: Duplicate value: "a"'],
    ),
    Case("no image", {"containers": [{"name": "main"}]}, [f"{C0}.image: Required value"]),
    Case(
        "port out of range",
        {"containers": [c(ports=[{"containerPort": 70000}])]},
        [
            f"{C0}.ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, "
            "inclusive"
        ],
    ),
    Case(
        "host port out of range",
        {"containers": [c(ports=[{"containerPort": 80, "hostPort": -1}])]},
        [f"{C0}.ports[0].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive"],
    ),
    Case(
        "bad protocol",
        {"containers": [c(ports=[{"containerPort": 80, "protocol": "HTTP"}])]},
        [
            f'{C0}.ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", '
            '"UDP"'
        ],
    ),
    Case(
        "bad port name",
        {"containers": [c(ports=[{"containerPort": 80, "name": "Http"}])]},
        [
            f'{C0}.ports[0].name: Invalid value: "Http": must contain only alpha-numeric '
            "characters (a-z, 0-9), and hyphens (-)"
        ],
    ),
    Case(
        "duplicate port name",
        {
            "containers": [
                c(
                    ports=[
                        {"containerPort": 80, "name": "web"},
                        {"containerPort": 81, "name": "web"},
                    ]
                )
            ]
        },
        [f'{C0}.ports[1].name: Duplicate value: "web"'],
    ),
    Case(
        "env without name",
        {"containers": [c(env=[{"value": "1"}])]},
        [f"{C0}.env[0].name: Required value"],
    ),
    Case(
        "env name with =",
        {"containers": [c(env=[{"name": "A=B", "value": "1"}])]},
        [
            f'{C0}.env[0].name: Invalid value: "A=B": a valid environment variable name must '
            "consist only of printable ASCII characters other than '='"
        ],
    ),
    Case(
        "mount of no volume",
        {"containers": [c(volumeMounts=[{"name": "data", "mountPath": "/data"}])]},
        [f'{C0}.volumeMounts[0].name: Not found: "data"'],
    ),
    Case(
        "mount without path",
        {
            "containers": [c(volumeMounts=[{"name": "data"}])],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
        [f"{C0}.volumeMounts[0].mountPath: Required value"],
    ),
    Case(
        "bad restartPolicy",
        {"containers": [c()], "restartPolicy": "Sometimes"},
        [
            'template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: '
            '"Always", "OnFailure", "Never"'
        ],
    ),
    Case(
        "duplicate volume",
        {
            "containers": [c()],
            "volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}],
        },
        ['template.spec.volumes[1].name: Duplicate value: "v"'],
    ),
    Case(
        "two volume sources",
        {
            "containers": [c()],
            "volumes": [{"name": "v", "emptyDir": {}, "hostPath": {"path": "/tmp"}}],
        },
        ["template.spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type"],
    ),
    Case(
        "bad volume name",
        {"containers": [c()], "volumes": [{"name": "V", "emptyDir": {}}]},
        [f'template.spec.volumes[0].name: Invalid value: "V": {LABEL}'],
    ),
]
