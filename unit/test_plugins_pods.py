"""What each job plugin does to the pods of realistic jobs: every env var and every file.

The jobs are Volcano's example manifests (TensorFlow, MPI, MXNet) adjusted to the sizes under
test, plus a PyTorch job written here. `files_of` plays the kubelet: it resolves a container's
mounts against the plugin objects, so a test reads `/etc/volcano/ps.host` the way the pod would.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import msgspec
import pytest
import yaml

from caldera.api.names import pod_name
from caldera.api.volcano import Job
from controllers.job.plugins import PluginSet, build_plugins, generate_key_pair
from controllers.job.plugins.ssh import SSHKeyPair
from unit.examples import EXAMPLES

NS = "team-a"
UID = "0b7c-uid"
# One key pair for the module: generation is slow and its content is not under test here.
KEY_PAIR: SSHKeyPair = generate_key_pair()


def load_example(
    filename: str, plugins: dict[str, list[str]], replicas: dict[str, int] | None = None
) -> Job:
    """A Volcano example manifest as a Job, with the given plugins and task sizes."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / filename).read_text()) if d]
    raw: dict[str, Any] = docs[0]
    raw["metadata"].update(namespace=NS, uid=UID)
    raw["spec"]["plugins"] = plugins
    for task in raw["spec"]["tasks"]:
        if replicas and task["name"] in replicas:
            task["replicas"] = replicas[task["name"]]
    return msgspec.convert(raw, Job)


def pytorch_job(plugins: dict[str, list[str]]) -> Job:
    """A PyTorch job: 1 master and 3 workers."""

    def task(name: str, replicas: int) -> dict[str, Any]:
        container = {"name": "pytorch", "image": "pytorch/pytorch:2.3", "command": ["python"]}
        return {
            "name": name,
            "replicas": replicas,
            "template": {"spec": {"containers": [container]}},
        }

    raw = {
        "metadata": {"name": "ddp", "namespace": NS, "uid": UID},
        "spec": {"plugins": plugins, "tasks": [task("master", 1), task("worker", 3)]},
    }
    return msgspec.convert(raw, Job)


def bare_pod(job: Job, task_name: str, index: int) -> dict[str, Any]:
    """The pod as the controller builds it before plugins: the template with a name."""
    task = next(t for t in job.spec.tasks if t.name == task_name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(job.metadata.name, task_name, index), "namespace": NS},
        "spec": copy.deepcopy(task.template.get("spec", {})),
    }


def build(job: Job) -> PluginSet:
    built = build_plugins(job, ssh_key_pair=KEY_PAIR)
    assert built.ok, built.message
    return built


def make_pod(job: Job, task_name: str, index: int) -> dict[str, Any]:
    return build(job).on_pod_create(job, bare_pod(job, task_name, index), task_name, index)


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """name -> value, or the valueFrom source."""
    out: dict[str, Any] = {}
    for entry in container.get("env", []):
        out[entry["name"]] = entry.get("value", entry.get("valueFrom"))
    return out


def resolved_env(job: Job, container: dict[str, Any]) -> dict[str, str]:
    """The env as the container sees it, configMapKeyRefs resolved against the plugin objects."""
    objects = {(o["kind"], o["metadata"]["name"]): o for o in build(job).resources(job)}
    out: dict[str, str] = {}
    for name, value in env_of(container).items():
        if isinstance(value, dict):
            ref = value["configMapKeyRef"]
            value = objects["ConfigMap", ref["name"]]["data"][ref["key"]]
        out[name] = value
    return out


def files_of(job: Job, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """path -> content of every file the plugin volumes put in the container."""
    objects = {(o["kind"], o["metadata"]["name"]): o for o in build(job).resources(job)}
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        sub = mount.get("subPath", "")
        if "configMap" in volume:
            data = dict(objects["ConfigMap", volume["configMap"]["name"]]["data"])
            items = {k: k for k in data}
        elif "secret" in volume:
            raw = objects["Secret", volume["secret"]["secretName"]]["data"]
            data = {k: base64.b64decode(v).decode() for k, v in raw.items()}
            items = {i["path"]: i["key"] for i in volume["secret"]["items"]}
        else:
            continue
        for path, key in items.items():
            if sub:
                if not path.startswith(sub + "/"):
                    continue
                path = path[len(sub) + 1 :]
            files[f"{mount['mountPath']}/{path}"] = data[key]
    return files


# --- TensorFlow: 2 ps + 4 workers ---------------------------------------------------------------

TF_FILE = "integrations_tensorflow_dist-mnist_tf-dist-mnist-example.yaml"
TF_JOB = "tensorflow-dist-mnist"


def tf_job() -> Job:
    return load_example(
        TF_FILE, {"env": [], "svc": [], "tensorflow": []}, replicas={"ps": 2, "worker": 4}
    )


def tf_host(task: str, i: int) -> str:
    return f"{TF_JOB}-{task}-{i}.{TF_JOB}"


@pytest.mark.parametrize(("task", "index"), [("ps", 0), ("ps", 1), ("worker", 0), ("worker", 3)])
def test_tensorflow_pod_env_and_files(task: str, index: int) -> None:
    """Every TF pod sees TF_CONFIG with all 6 hosts and its own role/index, the task index, the
    per-task host lists and counts, and /etc/volcano/<task>.host."""
    job = tf_job()
    pod = make_pod(job, task, index)
    (container,) = pod["spec"]["containers"]
    ps_hosts = [tf_host("ps", i) for i in range(2)]
    worker_hosts = [tf_host("worker", i) for i in range(4)]
    assert resolved_env(job, container) == {
        "VK_TASK_INDEX": str(index),
        "VC_TASK_INDEX": str(index),
        "VC_PS_HOSTS": ",".join(ps_hosts),
        "VC_PS_NUM": "2",
        "VC_WORKER_HOSTS": ",".join(worker_hosts),
        "VC_WORKER_NUM": "4",
        "TF_CONFIG": json.dumps(
            {
                "cluster": {
                    "ps": [f"{h}:2222" for h in ps_hosts],
                    "worker": [f"{h}:2222" for h in worker_hosts],
                },
                "task": {"type": task, "index": index},
            },
            separators=(",", ":"),
        ),
    }
    assert files_of(job, pod, container) == {
        "/etc/volcano/ps.host": "\n".join(ps_hosts),
        "/etc/volcano/worker.host": "\n".join(worker_hosts),
        "/etc/volcano/VC_PS_HOSTS": ",".join(ps_hosts),
        "/etc/volcano/VC_PS_NUM": "2",
        "/etc/volcano/VC_WORKER_HOSTS": ",".join(worker_hosts),
        "/etc/volcano/VC_WORKER_NUM": "4",
    }
    assert pod["spec"]["hostname"] == f"{TF_JOB}-{task}-{index}"
    assert pod["spec"]["subdomain"] == TF_JOB
    # the template's own port is kept, untouched
    assert container["ports"] == [{"containerPort": 2222, "name": "tfjob-port"}]


def test_tensorflow_roles_by_flag_and_single_pod_job() -> None:
    """--ps/--worker rename the role tasks, --port changes every address; a one-pod job gets no
    TF_CONFIG."""
    job = load_example(
        TF_FILE, {"tensorflow": ["--ps=worker", "--worker=ps", "--port=3000"]}, {"ps": 1}
    )
    (container,) = make_pod(job, "ps", 1)["spec"]["containers"]
    config = json.loads(env_of(container)["TF_CONFIG"])
    assert config["task"] == {"type": "worker", "index": 1}
    assert config["cluster"] == {
        "ps": [f"{tf_host('worker', i)}:3000" for i in range(2)],
        "worker": [f"{tf_host('ps', 0)}:3000"],
    }
    single = msgspec.convert(
        {
            "metadata": {"name": "one", "namespace": NS},
            "spec": {
                "plugins": {"tensorflow": []},
                "tasks": [
                    {
                        "name": "worker",
                        "replicas": 1,
                        "template": {"spec": {"containers": [{"name": "c"}]}},
                    }
                ],
            },
        },
        Job,
    )
    (container,) = make_pod(single, "worker", 0)["spec"]["containers"]
    assert "TF_CONFIG" not in env_of(container)


# --- PyTorch: 1 master + 3 workers --------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "index", "rank"), [("master", 0, "0"), ("worker", 0, "1"), ("worker", 2, "3")]
)
def test_pytorch_pod_env(task: str, index: int, rank: str) -> None:
    """MASTER_ADDR is the master's pod 0, WORLD_SIZE 4, RANK 0 for the master and index+1 for
    workers; port pytorchjob-port is declared."""
    job = pytorch_job({"pytorch": []})
    pod = make_pod(job, task, index)
    (container,) = pod["spec"]["containers"]
    assert resolved_env(job, container) == {
        "VC_MASTER_HOSTS": "ddp-master-0.ddp",
        "VC_MASTER_NUM": "1",
        "VC_WORKER_HOSTS": "ddp-worker-0.ddp,ddp-worker-1.ddp,ddp-worker-2.ddp",
        "VC_WORKER_NUM": "3",
        "MASTER_ADDR": "ddp-master-0.ddp",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "4",
        "RANK": rank,
    }
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]
    assert "initContainers" not in pod["spec"]


def test_pytorch_wait_master_and_missing_master() -> None:
    """--wait-master-enabled gives workers (not the master) a wait-for-master init container; a
    job without the master task gets no pytorch variables."""
    job = pytorch_job({"pytorch": ["--wait-master-enabled=true", "--wait-master-timeout=60"]})
    worker = make_pod(job, "worker", 1)
    (init,) = worker["spec"]["initContainers"]
    assert init["name"] == "wait-for-master"
    assert init["image"] == "busybox:1.36.1"
    assert "ddp-master-0.ddp" in init["command"][-1]
    assert "timeout 60" in init["command"][-1]
    assert "initContainers" not in make_pod(job, "master", 0)["spec"]
    # idempotent: applying the plugins again does not add a second init container
    again = build(job).on_pod_create(job, worker, "worker", 1)
    assert again == worker

    job = pytorch_job({"pytorch": ["--master=chief"]})
    (container,) = make_pod(job, "worker", 0)["spec"]["containers"]
    assert not {"MASTER_ADDR", "RANK", "WORLD_SIZE"} & set(env_of(container))


# --- MPI: 1 mpimaster + 2 mpiworker, ssh + svc (+ mpi) ------------------------------------------

MPI_FILE = "integrations_mpi_mpi-example.yaml"
MPI_JOB = "lm-mpi-job"
MPI_WORKERS = [f"{MPI_JOB}-mpiworker-{i}.{MPI_JOB}" for i in range(2)]


def mpi_config(port: int = 22) -> str:
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for host in [f"{MPI_JOB}-mpimaster-0.{MPI_JOB}", *MPI_WORKERS]:
        lines += [f"Host {host.split('.')[0]}", f"  HostName {host}", f"  Port {port}"]
    return "\n".join(lines) + "\n"


def ssh_files(path: str = "/root/.ssh", port: int = 22) -> dict[str, str]:
    public = KEY_PAIR.public_key.decode()
    return {
        f"{path}/id_rsa": KEY_PAIR.private_key_pem.decode(),
        f"{path}/id_rsa.pub": public,
        f"{path}/authorized_keys": public,
        f"{path}/config": mpi_config(port),
    }


@pytest.mark.parametrize("with_mpi", [False, True])
def test_mpi_master_sees_hosts_keys_and_mpi_host(with_mpi: bool) -> None:
    """The example (ssh + svc) gives the master the worker hosts file and the ssh files; with the
    mpi plugin it also gets MPI_HOST, and every container the mpijob-port."""
    plugins: dict[str, list[str]] = {"ssh": [], "svc": []}
    if with_mpi:
        plugins["mpi"] = ["--master=mpimaster", "--worker=mpiworker"]
    job = load_example(MPI_FILE, plugins)
    pod = make_pod(job, "mpimaster", 0)
    (container,) = pod["spec"]["containers"]
    expected_env = {
        "VC_MPIMASTER_HOSTS": f"{MPI_JOB}-mpimaster-0.{MPI_JOB}",
        "VC_MPIMASTER_NUM": "1",
        "VC_MPIWORKER_HOSTS": ",".join(MPI_WORKERS),
        "VC_MPIWORKER_NUM": "2",
    }
    if with_mpi:
        expected_env["MPI_HOST"] = ",".join(MPI_WORKERS)
    assert resolved_env(job, container) == expected_env
    files = files_of(job, pod, container)
    assert files["/etc/volcano/mpiworker.host"] == "\n".join(MPI_WORKERS)
    assert files["/etc/volcano/mpimaster.host"] == f"{MPI_JOB}-mpimaster-0.{MPI_JOB}"
    assert {k: v for k, v in files.items() if k.startswith("/root/.ssh/")} == ssh_files()
    # the example already declares port 22 as mpijob-port: not declared twice
    assert container["ports"] == [{"containerPort": 22, "name": "mpijob-port"}]
    secret_volume = next(v for v in pod["spec"]["volumes"] if "secret" in v)
    assert secret_volume["secret"]["defaultMode"] == 0o600


def test_mpi_worker_has_no_mpi_host_and_gets_port() -> None:
    """Workers get no MPI_HOST; a container without the port gets mpijob-port=--port (init
    containers too), one that already names that port keeps its own."""
    job = load_example(
        MPI_FILE, {"mpi": ["--master=mpimaster", "--worker=mpiworker", "--port=2200"]}
    )
    pod = bare_pod(job, "mpiworker", 1)
    pod["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]
    out = build(job).on_pod_create(job, pod, "mpiworker", 1)
    (container,) = out["spec"]["containers"]
    (init,) = out["spec"]["initContainers"]
    assert "MPI_HOST" not in env_of(container)
    # the template already names a port mpijob-port: a second one would make the pod invalid
    assert container["ports"] == [{"containerPort": 22, "name": "mpijob-port"}]
    assert init["ports"] == [{"name": "mpijob-port", "containerPort": 2200}]
    # build_plugins added svc and ssh for mpi: init containers get their mounts too
    assert {m["mountPath"] for m in init["volumeMounts"]} == {"/etc/volcano", "/root/.ssh"}


def test_ssh_key_path_and_port_flags() -> None:
    """--ssh-key-file-path moves the files (mode 0644), --ssh-port goes into the config."""
    job = load_example(
        MPI_FILE, {"ssh": ["--ssh-key-file-path=/home/mpi/.ssh", "--ssh-port=2022"], "svc": []}
    )
    pod = make_pod(job, "mpiworker", 0)
    (container,) = pod["spec"]["containers"]
    files = files_of(job, pod, container)
    assert {k: v for k, v in files.items() if "/.ssh/" in k} == ssh_files("/home/mpi/.ssh", 2022)
    secret_volume = next(v for v in pod["spec"]["volumes"] if "secret" in v)
    assert secret_volume["secret"]["defaultMode"] == 0o644


# --- MXNet: scheduler / server / worker ---------------------------------------------------------

MX_FILE = "integrations_mxnet_train_train-mnist-cpu.yaml"


@pytest.mark.parametrize(
    ("task", "index", "role"),
    [
        ("scheduler", 0, "scheduler"),
        ("server", 1, "server"),
        ("worker", 0, "worker"),
        ("worker", 1, "worker"),
    ],
)
def test_mxnet_dmlc_env(task: str, index: int, role: str) -> None:
    """ps-lite variables as MXJob set them; the plugin's values replace the example's own
    (port 9000 there, --port here) without duplicate entries."""
    job = load_example(MX_FILE, {"mxnet": ["--port=9000"], "svc": []})
    pod = make_pod(job, task, index)
    (container,) = pod["spec"]["containers"]
    names = [e["name"] for e in container["env"]]
    assert len(names) == len(set(names))
    env = resolved_env(job, container)
    expected = {
        "DMLC_ROLE": role,
        "DMLC_PS_ROOT_URI": "mxnet-job-scheduler-0.mxnet-job",
        "DMLC_PS_ROOT_PORT": "9000",
        "DMLC_NUM_SERVER": "2",
        "DMLC_NUM_WORKER": "2",
        "DMLC_USE_KUBERNETES": "1",
    }
    if role == "worker":
        expected["DMLC_WORKER_ID"] = str(index)
    assert {k: v for k, v in env.items() if k.startswith("DMLC_")} == expected
    ports = container.get("ports", [])
    assert ports == ([{"name": "mxjob-port", "containerPort": 9000}] if role == "scheduler" else [])


def test_mxnet_defaults_and_unrelated_task() -> None:
    """Default port 9091 and role names; a task with no role, or a job without a scheduler, gets
    no DMLC variables."""
    job = load_example(MX_FILE, {"mxnet": ["--server=ps"]})
    (container,) = make_pod(job, "server", 0)["spec"]["containers"]
    assert env_of(container)["DMLC_ROLE"] == "server"  # the example's own value, kept
    (container,) = make_pod(job, "worker", 0)["spec"]["containers"]
    env = env_of(container)
    assert env["DMLC_PS_ROOT_PORT"] == "9091"
    assert env["DMLC_NUM_SERVER"] == "0"  # no task named "ps"
    job = load_example(MX_FILE, {"mxnet": ["--scheduler=boss"]})
    (container,) = make_pod(job, "worker", 0)["spec"]["containers"]
    assert env_of(container)["DMLC_PS_ROOT_PORT"] == "9000"  # untouched example value


# --- env and svc details ------------------------------------------------------------------------


def test_env_and_svc_on_job_plugin_example() -> None:
    """job-plugin.yaml: dashes in task names become underscores in keys and env names; init
    containers get the index and the hosts too; inject-hosts-env=false leaves env alone."""
    job = load_example(
        "job-plugin.yaml", {"env": [], "svc": ["--inject-hosts-env=true"]}, {"default-nginx": 2}
    )
    pod = bare_pod(job, "default-nginx", 1)
    pod["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    out = build(job).on_pod_create(job, pod, "default-nginx", 1)
    hosts = ",".join(f"test-job-plugin-default-nginx-{i}.test-job-plugin" for i in range(2))
    for container in (*out["spec"]["containers"], *out["spec"]["initContainers"]):
        assert resolved_env(job, container) == {
            "VK_TASK_INDEX": "1",
            "VC_TASK_INDEX": "1",
            "VC_DEFAULT_NGINX_HOSTS": hosts,
            "VC_DEFAULT_NGINX_NUM": "2",
        }
        assert files_of(job, out, container)["/etc/volcano/default_nginx.host"] == hosts.replace(
            ",", "\n"
        )
    job = load_example("job-plugin.yaml", {"svc": ["--inject-hosts-env=false"]})
    (container,) = make_pod(job, "default-nginx", 0)["spec"]["containers"]
    assert "env" not in container
    assert container["volumeMounts"] == [
        {"name": "test-job-plugin-svc", "mountPath": "/etc/volcano"}
    ]


def test_template_hostname_and_subdomain_win() -> None:
    """A template's hostname/subdomain are kept on the pod and used in every host list; a fixed
    hostname yields one host for the task."""
    job = pytorch_job({"pytorch": [], "ssh": []})
    raw = msgspec.to_builtins(job)
    raw["spec"]["tasks"][0]["template"]["spec"].update(hostname="boss", subdomain="grid")
    job = msgspec.convert(raw, Job)
    pod = make_pod(job, "master", 0)
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("boss", "grid")
    (container,) = make_pod(job, "worker", 0)["spec"]["containers"]
    env = resolved_env(job, container)
    assert env["MASTER_ADDR"] == "boss.grid"
    assert env["VC_MASTER_HOSTS"] == "boss.grid"
    assert "Host boss\n  HostName boss.grid\n" in files_of(job, pod, container)["/root/.ssh/config"]


# --- purity -------------------------------------------------------------------------------------

ALL_JOBS = [
    pytest.param(tf_job, "worker", 2, id="tensorflow"),
    pytest.param(
        lambda: pytorch_job({"pytorch": ["--wait-master-enabled"]}), "worker", 1, id="pytorch"
    ),
    pytest.param(
        lambda: load_example(MPI_FILE, {"mpi": ["--master=mpimaster", "--worker=mpiworker"]}),
        "mpimaster",
        0,
        id="mpi",
    ),
    pytest.param(lambda: load_example(MX_FILE, {"mxnet": [], "env": []}), "worker", 1, id="mxnet"),
]


@pytest.mark.parametrize(("make_job", "task", "index"), ALL_JOBS)
def test_inputs_are_not_mutated_and_output_is_stable(make_job: Any, task: str, index: int) -> None:
    """on_pod_create leaves the pod and the Job's template untouched, returns a new pod, and
    gives the same pod when applied again (a rebuilt pod is identical)."""
    job = make_job()
    before_job = msgspec.to_builtins(job)
    pod = bare_pod(job, task, index)
    before_pod = copy.deepcopy(pod)
    plugins = build(job)
    out = plugins.on_pod_create(job, pod, task, index)
    assert pod == before_pod
    assert msgspec.to_builtins(job) == before_job
    assert out is not pod
    assert plugins.on_pod_create(job, out, task, index) == out
    assert plugins.on_pod_create(job, bare_pod(job, task, index), task, index) == out
    for plugin in plugins.plugins:
        single = plugin.on_pod_create(job, pod, task, index)
        assert single is not pod
        assert pod == before_pod
