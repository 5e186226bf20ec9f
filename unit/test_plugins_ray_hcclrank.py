"""The ray and hcclrank job plugins' pure core: the pods and objects they build from a Job
(Volcano's pkg/controllers/job/plugins/distributed-framework/ray and hcclrank)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
from hypothesis import assume, given
from hypothesis import strategies as st

from caldera.api.names import pod_name
from caldera.api.volcano import Job
from controllers.job.plugins import PluginSet, ResourceRef, build_plugins
from controllers.job.plugins.hcclrank import HCCL_RANK_KEY

NS = "team-a"
UID = "3f1e-uid"
IMAGE = "bitnami/ray:2.49.0"


def _task(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    containers = [{"name": name, "image": IMAGE}]
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {"containers": containers, "restartPolicy": "OnFailure", **spec},
        },
    }


def ray_job(
    plugins: dict[str, list[str]] | None = None, head_spec: dict[str, Any] | None = None
) -> Job:
    """Volcano's example/integrations/ray/ray-example.yaml (svc added, as the webhook does)."""
    raw = {
        "metadata": {"name": "ray-cluster-job", "namespace": NS, "uid": UID},
        "spec": {
            "minAvailable": 3,
            "plugins": plugins if plugins is not None else {"ray": [], "svc": []},
            "tasks": [
                _task("head", 1, **(head_spec or {})),
                _task("worker", 2),
            ],
        },
    }
    return msgspec.convert(raw, Job)


def pod_of(
    job: Job, task_name: str, index: int, plugins: PluginSet | None = None
) -> dict[str, Any]:
    """The pod the controller would create: the template, named, through the plugins."""
    task = next(t for t in job.spec.tasks if t.name == task_name)
    pod = {
        "metadata": {"name": pod_name(job.metadata.name, task_name, index)},
        "spec": copy.deepcopy(dict(task.template["spec"])),
    }
    if "metadata" in task.template:
        pod["metadata"].update(copy.deepcopy(task.template["metadata"]))
    built = plugins if plugins is not None else build_plugins(job)
    assert built.ok, built.message
    return built.on_pod_create(job, pod, task_name, index)


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["containers"] if c["name"] == name)
    return found


# --- ray --------------------------------------------------------------------------------------


HEAD_COMMAND = [
    "sh",
    "-c",
    "ray start --head --block --dashboard-host=0.0.0.0 --port=6379 --dashboard-port=8265 "
    "--ray-client-server-port=10001",
]


def test_ray_head_runs_ray_start_head_with_volcano_ports() -> None:
    """The head container runs Volcano's `ray start --head ...` and declares gcs, dashboard
    and client-server."""
    head = container(pod_of(ray_job(), "head", 0), "head")
    assert head["command"] == HEAD_COMMAND
    assert head["ports"] == [
        {"name": "gcs", "containerPort": 6379},
        {"name": "dashboard", "containerPort": 8265},
        {"name": "client-server", "containerPort": 10001},
    ]


def test_ray_workers_join_the_head_by_its_host_name() -> None:
    """Each worker runs `ray start --block --address=<head pod 0>.<job>:6379`, no ports."""
    for index in range(2):
        worker = container(pod_of(ray_job(), "worker", index), "worker")
        assert worker["command"] == [
            "sh",
            "-c",
            "ray start --block --address=ray-cluster-job-head-0.ray-cluster-job:6379",
        ]
        assert "ports" not in worker


def test_ray_arguments_change_names_ports_and_commands() -> None:
    """Non-default task, container and port flags reach both commands and the Service."""
    plugins = {
        "ray": ["--head=h", "--headContainer=r", "--worker=w", "--port=7000", "--clientPort=7001"],
        "svc": [],
    }
    raw = msgspec.to_builtins(ray_job(plugins))
    raw["spec"]["tasks"][0].update(name="h")
    raw["spec"]["tasks"][0]["template"]["spec"]["containers"].append({"name": "r", "image": IMAGE})
    raw["spec"]["tasks"][1].update(name="w")
    job = msgspec.convert(raw, Job)
    head = pod_of(job, "h", 0)
    assert "command" not in container(head, "head")  # not the named container
    assert container(head, "r")["command"][2].endswith(
        "--port=7000 --dashboard-port=8265 --ray-client-server-port=7001"
    )
    worker = container(pod_of(job, "w", 0), "worker")
    assert (
        worker["command"][2]
        == "ray start --block --address=ray-cluster-job-h-0.ray-cluster-job:7000"
    )
    service = build_plugins(job).resources(job)[-1]
    assert service["spec"]["selector"]["volcano.sh/task-spec"] == "h"
    assert [p["port"] for p in service["spec"]["ports"]] == [7000, 8265, 7001]


def test_ray_head_address_follows_the_template_hostname() -> None:
    """A head template with hostname and subdomain is addressed by them, as Volcano does."""
    job = ray_job(head_spec={"hostname": "raymaster", "subdomain": "raynet"})
    worker = container(pod_of(job, "worker", 1), "worker")
    assert worker["command"][2] == "ray start --block --address=raymaster.raynet:6379"


def test_ray_keeps_ports_and_args_the_user_declared() -> None:
    """A port number the head already declares is not added again; `args` are kept (only
    `command` is Volcano's)."""
    job = ray_job(
        head_spec={
            "containers": [
                {
                    "name": "head",
                    "image": IMAGE,
                    "args": ["--num-cpus=4"],
                    "ports": [{"name": "redis", "containerPort": 6379}],
                }
            ]
        }
    )
    head = container(pod_of(job, "head", 0), "head")
    assert [p["containerPort"] for p in head["ports"]] == [6379, 8265, 10001]
    assert head["ports"][0]["name"] == "redis"
    assert head["args"] == ["--num-cpus=4"]


def test_ray_service_selects_the_head_with_named_ports() -> None:
    """Service `<job>-head-svc`: ClusterIP, the head's pods by job and task, the three ports
    targeting the container ports by name, owned by the Job as its controller."""
    job = ray_job()
    built = build_plugins(job)
    services = [
        o for o in built.resources(job) if o["metadata"]["name"] == "ray-cluster-job-head-svc"
    ]
    assert len(services) == 1
    service = services[0]
    assert service["kind"] == "Service"
    assert "clusterIP" not in service["spec"]
    assert service["spec"]["selector"] == {
        "volcano.sh/job-name": "ray-cluster-job",
        "volcano.sh/job-namespace": NS,
        "volcano.sh/task-spec": "head",
    }
    assert service["spec"]["ports"] == [
        {"name": "gcs", "port": 6379, "targetPort": "gcs", "protocol": "TCP"},
        {"name": "dashboard", "port": 8265, "targetPort": "dashboard", "protocol": "TCP"},
        {"name": "client-server", "port": 10001, "targetPort": "client-server", "protocol": "TCP"},
    ]
    (owner,) = service["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Job", UID, True)
    assert ResourceRef("v1", "Service", NS, "ray-cluster-job-head-svc") in built.resource_refs(job)
    assert built.controlled_resources(job)["plugin-ray"] == "ray"


def test_ray_requires_svc() -> None:
    """ray without svc in the spec still gets svc (the webhook adds it; so does the
    controller), whose headless Service resolves the head's host name."""
    job = ray_job({"ray": []})
    assert build_plugins(job).names == ("svc", "ray")


# --- hcclrank ---------------------------------------------------------------------------------


def hccl_job(
    plugins: dict[str, list[str]], masters: int = 1, workers: int = 3, **template: Any
) -> Job:
    """An Ascend job: a master task and a worker task (one container each)."""
    npu = {"name": "npu", "image": "ascend/mindspore:2.3"}
    raw = {
        "metadata": {"name": "hccl", "namespace": NS, "uid": UID},
        "spec": {
            "plugins": plugins,
            "tasks": [
                {
                    "name": "master",
                    "replicas": masters,
                    "template": {"spec": {"containers": [npu]}, **template},
                },
                {
                    "name": "worker",
                    "replicas": workers,
                    "template": {"spec": {"containers": [npu]}},
                },
                {"name": "monitor", "replicas": 1, "template": {"spec": {"containers": [npu]}}},
            ],
        },
    }
    return msgspec.convert(raw, Job)


def rank(pod: dict[str, Any]) -> str | None:
    annotations: dict[str, str] = pod.get("metadata", {}).get("annotations") or {}
    return annotations.get(HCCL_RANK_KEY)


def test_hccl_ranks_masters_then_workers() -> None:
    """Masters get their index, workers the master replicas plus theirs; other tasks none."""
    job = hccl_job({"hcclrank": []}, masters=2, workers=3)
    assert [rank(pod_of(job, "master", i)) for i in range(2)] == ["0", "1"]
    assert [rank(pod_of(job, "worker", i)) for i in range(3)] == ["2", "3", "4"]
    assert rank(pod_of(job, "monitor", 0)) is None


def test_hccl_role_flags() -> None:
    """--master and --worker pick the tasks."""
    job = hccl_job({"hcclrank": ["--master=worker", "--worker=monitor"]}, workers=3)
    assert rank(pod_of(job, "worker", 2)) == "2"
    assert rank(pod_of(job, "monitor", 0)) == "3"
    assert rank(pod_of(job, "master", 0)) is None


def test_hccl_annotation_in_the_template_wins() -> None:
    """A template that sets hccl/rankIndex keeps its value."""
    job = hccl_job({"hcclrank": []}, metadata={"annotations": {HCCL_RANK_KEY: "7"}})
    assert rank(pod_of(job, "master", 0)) == "7"


def test_hccl_reads_a_literal_rank_env() -> None:
    """A container's literal RANK becomes the rank; a RANK from valueFrom does not count."""
    raw = msgspec.to_builtins(hccl_job({"hcclrank": []}))
    env = [{"name": "RANK", "value": "5"}]
    raw["spec"]["tasks"][2]["template"]["spec"]["containers"][0]["env"] = env
    ref = [{"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    raw["spec"]["tasks"][1]["template"]["spec"]["containers"][0]["env"] = ref
    job = msgspec.convert(raw, Job)
    assert rank(pod_of(job, "monitor", 0)) == "5"
    assert rank(pod_of(job, "worker", 1)) == "2"


def test_hccl_after_pytorch_agrees_with_its_rank() -> None:
    """With pytorch (which runs first and sets RANK), the annotation is that RANK."""
    job = hccl_job({"pytorch": [], "hcclrank": []}, masters=1, workers=3)
    built = build_plugins(job)
    assert built.names == ("svc", "pytorch", "hcclrank")
    for task_name, count in (("master", 1), ("worker", 3)):
        for i in range(count):
            pod = pod_of(job, task_name, i, built)
            env = {e["name"]: e.get("value") for e in container(pod, "npu")["env"]}
            assert rank(pod) == env["RANK"]


def test_hccl_creates_and_records_nothing() -> None:
    """Like Volcano's, hcclrank makes no object and no controlledResources entry."""
    job = hccl_job({"hcclrank": []})
    built = build_plugins(job)
    assert built.resources(job) == []
    assert built.resource_refs(job) == []
    assert built.controlled_resources(job) == {}


@given(masters=st.integers(0, 6), workers=st.integers(0, 12))
def test_hccl_ranks_are_zero_to_n_once_each(masters: int, workers: int) -> None:
    """The master and worker pods' ranks are exactly 0..N-1, each once, and rebuilding a pod
    (a replaced pod) gives it the same rank."""
    job = hccl_job({"hcclrank": []}, masters=masters, workers=workers)
    built = build_plugins(job)
    pods = [pod_of(job, "master", i, built) for i in range(masters)]
    pods += [pod_of(job, "worker", i, built) for i in range(workers)]
    assert sorted(int(rank(p) or -1) for p in pods) == list(range(masters + workers))
    if pods:
        again = built.on_pod_create(job, pods[-1], "worker" if workers else "master", len(pods) - 1)
        assert again == pods[-1]


@given(
    port=st.integers(1, 65535),
    dashboard=st.integers(1, 65535),
    client=st.integers(1, 65535),
    workers=st.integers(0, 5),
)
def test_ray_pods_are_stable_and_ports_unique(
    port: int, dashboard: int, client: int, workers: int
) -> None:
    """Whatever the (distinct) ports: applying the plugins again changes nothing, the head
    declares each port once, and the Service's ports are the head's."""
    assume(len({port, dashboard, client}) == 3)
    args = [f"--port={port}", f"--dashboardPort={dashboard}", f"--clientPort={client}"]
    raw = msgspec.to_builtins(ray_job({"ray": args}))
    raw["spec"]["tasks"][1]["replicas"] = workers
    job = msgspec.convert(raw, Job)
    built = build_plugins(job)
    head = pod_of(job, "head", 0, built)
    assert built.on_pod_create(job, head, "head", 0) == head
    numbers = [p["containerPort"] for p in container(head, "head")["ports"]]
    assert numbers == [port, dashboard, client]
    service = built.resources(job)[-1]
    assert [p["port"] for p in service["spec"]["ports"]] == numbers
