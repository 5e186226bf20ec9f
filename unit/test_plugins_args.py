"""Plugin arguments, required plugins and the plugin registry (caldera.api.plugins,
controllers.job.plugins.build_plugins)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.jobspec import PLUGINS
from caldera.api.plugins import (
    IMPLEMENTED_PLUGINS,
    EnvOptions,
    HCCLRankOptions,
    MPIOptions,
    MXNetOptions,
    PluginArgumentError,
    PluginOptions,
    PytorchOptions,
    RayOptions,
    SSHOptions,
    SvcOptions,
    TensorflowOptions,
    parse_plugin_args,
    with_required_plugins,
)
from caldera.api.volcano import Job
from controllers.job.plugins import PluginError, build_plugins

FAKE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretsecret\n-----END RSA PRIVATE KEY-----\n"


def job_with(plugins: dict[str, list[str]]) -> Job:
    return msgspec.convert(
        {
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": {"tasks": [{"name": "master", "replicas": 1}], "plugins": plugins},
        },
        Job,
    )


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("env", [], EnvOptions()),
        ("svc", [], SvcOptions()),
        (
            "svc",
            [
                "--publish-not-ready-addresses=true",
                "--disable-network-policy",
                "--inject-hosts-env=false",
            ],
            SvcOptions(
                publish_not_ready_addresses=True,
                disable_network_policy=True,
                inject_hosts_env=False,
            ),
        ),
        (
            "ssh",
            ["--ssh-key-file-path=/home/user/.ssh"],
            SSHOptions(key_file_path="/home/user/.ssh"),
        ),
        ("ssh", ["--ssh-port=2022"], SSHOptions(port=2022)),
        ("tensorflow", [], TensorflowOptions()),
        (
            "tensorflow",
            ["--ps=param", "--worker=trainer", "--port=5000"],
            TensorflowOptions(ps="param", worker="trainer", port=5000),
        ),
        ("pytorch", [], PytorchOptions()),
        (
            "pytorch",
            ["--master=head", "--port", "29500", "--wait-master-enabled=true"],
            PytorchOptions(master="head", port=29500, wait_master_enabled=True),
        ),
        ("mpi", [], MPIOptions()),
        ("mpi", ["--master=mpimaster", "--worker=mpiworker"], MPIOptions("mpimaster", "mpiworker")),
        ("mxnet", [], MXNetOptions()),
        ("mxnet", ["--port=9000", "--scheduler=sched"], MXNetOptions(scheduler="sched", port=9000)),
        ("ray", [], RayOptions()),
        (
            "ray",
            ["--head=h", "--headContainer=ray", "--dashboardPort=9000", "--clientPort", "10002"],
            RayOptions(head="h", head_container="ray", dashboard_port=9000, client_port=10002),
        ),
        ("hcclrank", [], HCCLRankOptions()),
        ("hcclrank", ["--master=chief", "--worker=npu"], HCCLRankOptions("chief", "npu")),
    ],
)
def test_valid_arguments_give_typed_options(
    name: str, args: list[str], expected: PluginOptions
) -> None:
    """Go-flag-style arguments parse into the plugin's options; unset flags keep Volcano's
    defaults."""
    assert parse_plugin_args(name, args) == expected


@pytest.mark.parametrize(
    ("name", "args", "fragments"),
    [
        # unknown flag: names the plugin, the flag and the allowed flags
        ("svc", ["--foo=1"], ["svc", "-foo", "--publish-not-ready-addresses"]),
        ("env", ["--x"], ["env", "-x", "none"]),
        # bad values
        ("tensorflow", ["--port=abc"], ["tensorflow", "--port", "'abc'"]),
        ("mpi", ["--port=70000"], ["mpi", "--port", "1 and 65535"]),
        ("svc", ["--disable-network-policy=maybe"], ["svc", "--disable-network-policy", "true"]),
        ("pytorch", ["--wait-master-timeout=0"], ["pytorch", "--wait-master-timeout", "positive"]),
        ("mpi", ["--master="], ["mpi", "--master", "name a task"]),
        ("mxnet", ["--server=worker"], ["mxnet", "--server", "--worker", "'worker'"]),
        ("ssh", ["--ssh-key-file-path=relative"], ["ssh", "--ssh-key-file-path", "absolute"]),
        ("ssh", ["--ssh-public-key=ssh-rsa AAA"], ["ssh", "--ssh-public-key", "--ssh-private-key"]),
        ("ssh", ["--ssh-private-key=nonsense"], ["ssh", "--ssh-private-key", "PEM"]),
        # missing value, positional argument
        ("pytorch", ["--port"], ["pytorch", "-port", "needs an argument"]),
        ("mpi", ["master"], ["mpi", "'master'", "--name=value"]),
        # ray: roles, containers, and three distinct ports of one Service
        ("ray", ["--worker=head"], ["ray", "--head", "--worker", "'head'"]),
        ("ray", ["--headContainer="], ["ray", "--headContainer", "name a container"]),
        ("ray", ["--clientPort=6379"], ["ray", "--port", "--clientPort", "6379", "own port"]),
        ("ray", ["--dashboardPort=0"], ["ray", "--dashboardPort", "1 and 65535"]),
        ("hcclrank", ["--master=worker"], ["hcclrank", "--master", "--worker", "'worker'"]),
        ("hcclrank", ["--worker="], ["hcclrank", "--worker", "name a task"]),
        ("hcclrank", ["--rank=3"], ["hcclrank", "-rank", "--master, --worker"]),
        # unknown plugin
        ("horovod", [], ["unable to find job plugin: horovod"]),
    ],
)
def test_bad_arguments_raise_a_clear_error(
    name: str, args: list[str], fragments: list[str]
) -> None:
    """A bad argument raises PluginArgumentError naming the plugin, the argument and what is
    allowed."""
    with pytest.raises(PluginArgumentError) as info:
        parse_plugin_args(name, args)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_private_key_never_quoted_in_errors() -> None:
    """A private key pasted where a flag belongs is not echoed in the error message."""
    with pytest.raises(PluginArgumentError) as info:
        parse_plugin_args("ssh", [FAKE_KEY])
    assert "secretsecret" not in str(info.value)
    assert "<redacted>" in str(info.value)


def test_ssh_options_repr_hides_private_key() -> None:
    """SSHOptions with a user key shows neither the key in repr nor in str."""
    options = parse_plugin_args("ssh", [f"--ssh-private-key={FAKE_KEY}"])
    assert isinstance(options, SSHOptions)
    assert options.private_key == FAKE_KEY
    for text in (repr(options), str(options), f"{options}", repr([options])):
        assert "secretsecret" not in text
        assert "<redacted>" in text


@pytest.mark.parametrize(
    ("plugins", "expected"),
    [
        ({}, {}),
        ({"env": []}, {"env": ()}),
        ({"tensorflow": []}, {"tensorflow": (), "svc": ()}),
        ({"pytorch": ["--port=1"]}, {"pytorch": ("--port=1",), "svc": ()}),
        ({"mxnet": []}, {"mxnet": (), "svc": ()}),
        ({"mpi": []}, {"mpi": (), "svc": (), "ssh": ()}),
        # what the user set is kept, arguments included
        (
            {"mpi": [], "svc": ["--disable-network-policy=true"], "ssh": ["--ssh-port=2022"]},
            {"mpi": (), "svc": ("--disable-network-policy=true",), "ssh": ("--ssh-port=2022",)},
        ),
        ({"ssh": [], "svc": []}, {"ssh": (), "svc": ()}),
    ],
)
def test_with_required_plugins(
    plugins: dict[str, list[str]], expected: dict[str, tuple[str, ...]]
) -> None:
    """svc is added for tensorflow/pytorch/mpi/mxnet and ssh for mpi, never overriding the
    user's entries."""
    assert with_required_plugins(plugins) == expected


def test_with_required_plugins_does_not_mutate_input() -> None:
    """The caller's mapping is left as it was."""
    plugins = {"mpi": ["--port=22"]}
    with_required_plugins(plugins)
    assert plugins == {"mpi": ["--port=22"]}


def test_build_plugins_orders_and_adds_required() -> None:
    """build_plugins adds svc and ssh for mpi and applies plugins in a fixed order."""
    built = build_plugins(job_with({"mpi": [], "env": []}))
    assert built.ok
    assert built.names == ("env", "svc", "ssh", "mpi")
    assert built.controlled_resources(job_with({})) == {
        "plugin-env": "env",
        "plugin-svc": "svc",
        "plugin-ssh": "ssh",
        "plugin-mpi": "mpi",
    }


def test_build_plugins_reports_errors_instead_of_raising() -> None:
    """Bad arguments and unknown plugins come back as errors, one per plugin, and no plugin
    runs."""
    built = build_plugins(
        job_with({"svc": ["--nope"], "tensorflow": ["--port=x"], "foo": [], "env": []})
    )
    assert not built.ok
    assert built.plugins == ()
    assert [e.plugin for e in built.errors] == ["svc", "tensorflow", "foo"]
    assert all(isinstance(e, PluginError) for e in built.errors)
    assert "unable to find job plugin: foo" in built.message
    assert "--port" in built.message
    assert built.message.count(";") == 3


def test_build_plugins_error_hides_user_key() -> None:
    """An Event message built from ssh errors does not carry the key."""
    built = build_plugins(job_with({"ssh": ["--ssh-public-key=x", FAKE_KEY]}))
    assert not built.ok
    assert "secretsecret" not in built.message
    assert "secretsecret" not in repr(built)


@given(
    st.dictionaries(
        st.sampled_from([*IMPLEMENTED_PLUGINS, "ray", "x"]),
        st.lists(st.text(max_size=12), max_size=3),
        max_size=4,
    )
)
def test_build_plugins_never_raises(plugins: dict[str, list[str]]) -> None:
    """Whatever the arguments, build_plugins returns plugins or errors, never an exception."""
    built = build_plugins(job_with(plugins))
    assert bool(built.plugins) != bool(built.errors) or (not built.plugins and not built.errors)
    if built.ok:
        assert set(built.names) == set(with_required_plugins(plugins))


def test_every_volcano_plugin_runs() -> None:
    """Every plugin of Volcano's registry (and Caldera's mxnet) is one the controller runs."""
    assert set(IMPLEMENTED_PLUGINS) == set(PLUGINS)


def test_ray_without_its_head_task_is_an_error() -> None:
    """ray on a job without the head task is a PluginError with Volcano's words (Volcano's
    controller fails every pod of such a job), not pods that never find their head."""
    built = build_plugins(job_with({"ray": []}))
    assert [e.plugin for e in built.errors] == ["ray"]
    assert "spec.plugins.ray: job j doesn't have head task head" in built.message
    assert build_plugins(job_with({"ray": ["--head=master"]})).ok


def test_ray_service_name_must_fit() -> None:
    """`<job>-head-svc` longer than 63 characters is an error naming metadata.name."""
    long_name = "a" * 55
    job = msgspec.convert(
        {
            "metadata": {"name": long_name, "namespace": "ns"},
            "spec": {"tasks": [{"name": "head", "replicas": 1}], "plugins": {"ray": []}},
        },
        Job,
    )
    built = build_plugins(job)
    assert "metadata.name: Invalid value" in built.message
    assert f"{long_name}-head-svc" in built.message
    assert build_plugins(
        msgspec.structs.replace(job, metadata=msgspec.structs.replace(job.metadata, name="a" * 54))
    ).ok


def test_no_plugins_still_returns_a_new_pod() -> None:
    """A job without plugins gets an equal pod that shares nothing with the input."""
    job = job_with({})
    pod: dict[str, Any] = {
        "metadata": {"name": "j-master-0"},
        "spec": {"containers": [{"name": "c"}]},
    }
    out = build_plugins(job).on_pod_create(job, pod, "master", 0)
    assert out == pod
    out["spec"]["containers"].append({"name": "d"})
    assert pod["spec"]["containers"] == [{"name": "c"}]
