"""Plugin argument parsing and the plugins a job needs (caldera.api.jobspec), shared with the
job controller."""

from __future__ import annotations

import pytest

from caldera.api.jobspec import (
    PLUGINS,
    PluginArgError,
    default_task_min_available,
    job_min_available,
    parse_plugin_args,
    required_plugins,
)
from caldera.api.volcano import PartitionPolicy, TaskSpec


def test_registered_plugins() -> None:
    """Volcano's registered plugins plus Caldera's mxnet."""
    assert set(PLUGINS) == {
        "env",
        "svc",
        "ssh",
        "tensorflow",
        "pytorch",
        "mpi",
        "ray",
        "hcclrank",
        "mxnet",
    }


def test_defaults_when_no_arguments() -> None:
    """Every flag has Volcano's default."""
    assert parse_plugin_args("pytorch", []) == {
        "master": "master",
        "worker": "worker",
        "port": 23456,
        "wait-master-enabled": False,
        "wait-master-timeout": 300,
        "wait-master-image": "busybox:1.36.1",
    }
    assert parse_plugin_args("svc", [])["inject-hosts-env"] is True


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--port=5000"], 5000),
        (["-port=5000"], 5000),
        (["--port", "5000"], 5000),
        (["--port=0x10"], 16),
        (["--port=1", "--port=2"], 2),
    ],
)
def test_go_flag_forms(args: list[str], expected: int) -> None:
    """The forms Go's flag package accepts, the last one winning."""
    assert parse_plugin_args("mpi", args)["port"] == expected


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (["--disable-network-policy"], True),
        (["--disable-network-policy=false"], False),
        (["-disable-network-policy=T"], True),
        (["--disable-network-policy=0"], False),
    ],
)
def test_boolean_flags(args: list[str], value: bool) -> None:
    """A bare boolean flag is true; strconv.ParseBool spellings are accepted."""
    assert parse_plugin_args("svc", args)["disable-network-policy"] is value


@pytest.mark.parametrize(
    ("plugin", "args", "message"),
    [
        ("nope", [], "unable to find job plugin: nope"),
        ("svc", ["--nope"], "flag provided but not defined: -nope"),
        ("env", ["--x=1"], "known flags: none"),
        ("mpi", ["--port"], "flag needs an argument: -port"),
        ("mpi", ["--port=abc"], "invalid integer value 'abc' for flag --port"),
        ("mpi", ["--port=0"], "must be a port between 1 and 65535"),
        ("ssh", ["--ssh-port=70000"], "must be a port between 1 and 65535"),
        ("svc", ["--inject-hosts-env=yes"], "invalid boolean value 'yes'"),
        ("mpi", ["master"], "unexpected argument 'master'"),
        ("mpi", ["---port=1"], "unexpected argument"),
        ("mpi", ["--=1"], "bad flag syntax"),
        ("mpi", ["--", "x"], "unexpected argument 'x'"),
        ("mpi", ["--port=" + "9" * 30], "out of range"),
    ],
)
def test_bad_arguments(plugin: str, args: list[str], message: str) -> None:
    """Each malformed argument raises PluginArgError naming the plugin and the flag."""
    with pytest.raises(PluginArgError) as err:
        parse_plugin_args(plugin, args)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("plugins", "added"),
    [
        ({}, {}),
        ({"env": []}, {}),
        ({"tensorflow": []}, {"svc": ()}),
        ({"pytorch": [], "svc": ["--disable-network-policy"]}, {}),
        ({"mpi": []}, {"svc": (), "ssh": ()}),
        ({"mpi": [], "ssh": ["--ssh-port=2022"]}, {"svc": ()}),
        ({"ray": []}, {"svc": ()}),
        ({"mxnet": []}, {"svc": ()}),
    ],
)
def test_required_plugins(plugins: dict[str, list[str]], added: dict[str, tuple[str, ...]]) -> None:
    """svc for the frameworks, ssh for mpi, never a plugin the user set."""
    assert required_plugins(plugins) == added


def test_min_available_defaults() -> None:
    """Task default is replicas, or minPartitions*partitionSize; the job sums the tasks'."""
    plain = TaskSpec(name="a", replicas=4)
    parted = TaskSpec(
        name="b",
        replicas=6,
        partition_policy=PartitionPolicy(total_partitions=3, partition_size=2, min_partitions=2),
    )
    assert default_task_min_available(plain) == 4
    assert default_task_min_available(parted) == 4
    assert job_min_available([plain, parted, TaskSpec(name="c", replicas=9, min_available=1)]) == 9
