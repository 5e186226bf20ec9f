"""The objects the job plugins want to exist (Service, ConfigMap, NetworkPolicy, Secret), the ssh
key pair, and what must never show the private key."""

from __future__ import annotations

import base64

import msgspec
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from caldera.api import core
from caldera.api.volcano import Job
from controllers.job.plugins import (
    KeyPairMissingError,
    PluginSet,
    ResourceRef,
    SSHKeyPair,
    build_plugins,
    generate_key_pair,
    key_pair_from_secret,
)
from controllers.job.plugins.ssh import SSHPlugin
from unit.test_plugins_pods import KEY_PAIR, MPI_FILE, TF_FILE, load_example, pytorch_job

OWNER = {
    "apiVersion": "batch.volcano.sh/v1alpha1",
    "kind": "Job",
    "name": "lm-mpi-job",
    "uid": "0b7c-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}
JOB_LABELS = {"volcano.sh/job-name": "lm-mpi-job", "volcano.sh/job-namespace": "team-a"}


def mpi_job(**svc_flags: bool) -> Job:
    svc = [f"--{k.replace('_', '-')}={str(v).lower()}" for k, v in svc_flags.items()]
    return load_example(MPI_FILE, {"mpi": ["--master=mpimaster", "--worker=mpiworker"], "svc": svc})


def built(job: Job, key_pair: SSHKeyPair | None = KEY_PAIR) -> PluginSet:
    plugins = build_plugins(job, ssh_key_pair=key_pair)
    assert plugins.ok, plugins.message
    return plugins


def test_mpi_job_objects() -> None:
    """An MPI job wants the hosts ConfigMap, the headless Service, the NetworkPolicy and the ssh
    Secret, each named deterministically, owned by the Job and labelled with it."""
    job = mpi_job()
    objects = built(job).resources(job)
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("ConfigMap", "lm-mpi-job-svc"),
        ("Service", "lm-mpi-job"),
        ("NetworkPolicy", "lm-mpi-job"),
        ("Secret", "lm-mpi-job-ssh"),
    ]
    for obj in objects:
        assert obj["metadata"]["namespace"] == "team-a"
        assert obj["metadata"]["ownerReferences"] == [OWNER]
        assert obj["metadata"]["labels"] == JOB_LABELS
    service = objects[1]
    assert service["apiVersion"] == "v1"
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": JOB_LABELS,
        "publishNotReadyAddresses": False,
    }
    policy = objects[2]
    assert policy["apiVersion"] == "networking.k8s.io/v1"
    assert policy["spec"] == {
        "podSelector": {"matchLabels": JOB_LABELS},
        "ingress": [{"from": [{"podSelector": {"matchLabels": JOB_LABELS}}]}],
        "policyTypes": ["Ingress"],
    }
    assert objects[3]["type"] == "Opaque"


def test_objects_decode_as_kubernetes_objects() -> None:
    """The dicts encode to JSON the core models read back, key material included on the wire."""
    job = mpi_job()
    by_kind = {o["kind"]: o for o in built(job).resources(job)}
    service = msgspec.json.decode(msgspec.json.encode(by_kind["Service"]), type=core.Service)
    assert service.spec.cluster_ip == "None"
    secret = msgspec.json.decode(msgspec.json.encode(by_kind["Secret"]), type=core.Secret)
    assert key_pair_from_secret(secret.data) == KEY_PAIR
    cm = msgspec.json.decode(msgspec.json.encode(by_kind["ConfigMap"]), type=core.ConfigMap)
    assert cm.data["VC_MPIWORKER_NUM"] == "2"


@pytest.mark.parametrize(
    ("flags", "kinds", "publish"),
    [
        ({}, ["ConfigMap", "Service", "NetworkPolicy"], False),
        ({"disable_network_policy": True}, ["ConfigMap", "Service"], False),
        ({"publish_not_ready_addresses": True}, ["ConfigMap", "Service", "NetworkPolicy"], True),
    ],
)
def test_svc_flags(flags: dict[str, bool], kinds: list[str], publish: bool) -> None:
    """--disable-network-policy drops the NetworkPolicy from both the objects and the refs;
    --publish-not-ready-addresses reaches the Service."""
    job = mpi_job(**flags)
    svc = built(job).get("svc")
    assert svc is not None
    objects = svc.resources(job)
    assert [o["kind"] for o in objects] == kinds
    assert [r.kind for r in svc.resource_refs(job)] == kinds
    assert objects[1]["spec"]["publishNotReadyAddresses"] is publish


@pytest.mark.parametrize(
    "make_job",
    [
        mpi_job,
        lambda: load_example(TF_FILE, {"tensorflow": [], "env": []}),
        lambda: pytorch_job({"pytorch": []}),
    ],
)
def test_refs_name_exactly_the_objects_and_are_deterministic(make_job: object) -> None:
    """resource_refs names what resources builds; both are the same on every call and neither
    touches the Job."""
    assert callable(make_job)
    job: Job = make_job()
    before = msgspec.to_builtins(job)
    plugins = built(job)
    objects = plugins.resources(job)
    assert plugins.resource_refs(job) == [
        ResourceRef(o["apiVersion"], o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])
        for o in objects
    ]
    assert built(job).resources(job) == objects
    assert msgspec.to_builtins(job) == before


def test_configmap_follows_scaling_other_objects_do_not() -> None:
    """The hosts ConfigMap changes with replicas and is marked for update; Service, Policy and
    Secret are create-if-absent."""
    small = load_example(MPI_FILE, {"mpi": [], "svc": []})
    large = load_example(MPI_FILE, {"mpi": [], "svc": []}, replicas={"mpiworker": 5})
    plugins = built(small)
    cm_small, *rest_small = plugins.resources(small)
    cm_large, *rest_large = built(large).resources(large)
    assert cm_large["data"]["VC_MPIWORKER_NUM"] == "5"
    assert cm_small["data"] != cm_large["data"]
    assert plugins.update_on_change(cm_small)
    for obj in rest_small:
        assert not plugins.update_on_change(obj)
    assert rest_small[:2] == rest_large[:2]  # Service and NetworkPolicy do not depend on sizes


def test_controlled_resources() -> None:
    """status.controlledResources gets plugin-<name>: <name> for every plugin that runs."""
    job = load_example(TF_FILE, {"tensorflow": [], "env": []})
    assert built(job).controlled_resources(job) == {
        "plugin-env": "env",
        "plugin-svc": "svc",
        "plugin-tensorflow": "tensorflow",
    }


# --- keys ---------------------------------------------------------------------------------------


def test_generated_key_pair_formats() -> None:
    """RSA 2048 in PKCS#1 PEM, the public key as an authorized_keys line of the same key; two
    jobs get different keys."""
    pair = generate_key_pair()
    assert pair.private_key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(pair.private_key_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size == 2048
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert pair.public_key == public + b"\n"
    assert generate_key_pair() != pair


def test_secret_data_and_round_trip() -> None:
    """The Secret holds id_rsa, id_rsa.pub, authorized_keys and config; reading it back gives the
    same pair, so a reconcile keeps the job's keys."""
    job = mpi_job()
    (secret,) = built(job).get("ssh").resources(job)  # type: ignore[union-attr]
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert set(data) == {"id_rsa", "id_rsa.pub", "authorized_keys", "config"}
    assert data["authorized_keys"] == data["id_rsa.pub"] == KEY_PAIR.public_key
    assert data["id_rsa"] == KEY_PAIR.private_key_pem
    assert data["config"].startswith(b"StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n")
    assert key_pair_from_secret(secret["data"]) == KEY_PAIR


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"id_rsa": "AAAA"},
        {"id_rsa": "not base64!", "id_rsa.pub": "AAAA"},
        {"id_rsa": "", "id_rsa.pub": ""},
    ],
)
def test_key_pair_from_incomplete_secret(data: dict[str, str]) -> None:
    """A Secret missing a key, or with bad base64, yields no pair (the caller generates one)."""
    assert key_pair_from_secret(data) is None


def test_missing_key_pair_is_a_caller_error_and_reported() -> None:
    """Without a pair the set says it needs one, and asking for the Secret raises; the Service
    and pods do not need it."""
    job = mpi_job()
    plugins = built(job, key_pair=None)
    assert plugins.needs_ssh_key_pair
    with pytest.raises(KeyPairMissingError):
        plugins.resources(job)
    assert plugins.resource_refs(job)[-1] == ResourceRef("v1", "Secret", "team-a", "lm-mpi-job-ssh")
    with_pair = plugins.with_ssh_key_pair(KEY_PAIR)
    assert not with_pair.needs_ssh_key_pair
    assert with_pair.resources(job) == built(job).resources(job)
    assert not built(pytorch_job({"pytorch": []}), key_pair=None).needs_ssh_key_pair


def test_user_provided_private_key() -> None:
    """--ssh-private-key is used as is (nothing generated); the public key is derived from it
    when not given."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    job = load_example(MPI_FILE, {"ssh": [f"--ssh-private-key={pem}"]})
    plugins = built(job, key_pair=None)
    assert not plugins.needs_ssh_key_pair
    (secret,) = plugins.get("ssh").resources(job)  # type: ignore[union-attr]
    pair = key_pair_from_secret(secret["data"])
    assert pair is not None
    assert pair.private_key_pem.decode() == pem
    expected = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert pair.public_key == expected + b"\n"
    assert "OPENSSH PRIVATE KEY" not in repr(plugins)


def test_private_key_never_in_repr_or_str() -> None:
    """Nothing a caller might log shows the private key: the pair, the plugin, the set, the
    Secret, its data, a list of objects."""
    job = mpi_job()
    plugins = built(job)
    ssh = plugins.get("ssh")
    assert isinstance(ssh, SSHPlugin)
    secret = ssh.resources(job)[0]
    private_b64 = base64.b64encode(KEY_PAIR.private_key_pem).decode()
    body = KEY_PAIR.private_key_pem.decode().splitlines()[1]
    loggables: list[object] = [
        KEY_PAIR,
        ssh,
        plugins,
        secret,
        secret["data"],
        plugins.resources(job),
        {"objects": plugins.resources(job)},
    ]
    for thing in loggables:
        for text in (repr(thing), str(thing), f"{thing}"):
            assert private_b64[:40] not in text
            assert body not in text
            assert "PRIVATE KEY-----" not in text
    # ... while the wire form carries it
    assert private_b64 in msgspec.json.encode(secret).decode()
