"""ssh plugin: one key pair per job in Secret `<job>-ssh`, mounted in every pod.

The Secret (Volcano's plugins/ssh/ssh.go) holds `id_rsa` (an RSA 2048 key, PKCS#1 PEM
"RSA PRIVATE KEY"), `id_rsa.pub` and `authorized_keys` (the public key in authorized_keys
format), and `config`: `StrictHostKeyChecking no`, `UserKnownHostsFile /dev/null`, then a
`Host`/`HostName`/`Port` stanza for every pod of the job. Each pod mounts the four files under
`--ssh-key-file-path` (default `/root/.ssh`) through `subPath: .ssh`, mode 0600 (0644 for a
non-default path, so that a non-root user can read them), in containers and init containers.

Key generation is random, so it is not part of the pure plugin: the I/O layer obtains a
`SSHKeyPair` on each sync of the job (`key_pair_from_secret` on the existing Secret, else
`generate_key_pair()` in a worker thread: RSA generation takes tens of milliseconds) and builds
the plugin with it. With `--ssh-private-key` the user's keys are used and nothing is generated.
Volcano does not update the Secret on job update (subPath mounts never see updates anyway); it is
create-if-absent.

No repr or str of anything here (`SSHKeyPair`, `SSHPlugin`, the Secret dict and its `data`)
shows the private key.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from caldera.api.plugins import DEFAULT_SSH_KEY_PATH, SSHOptions
from caldera.api.volcano import Job
from controllers.job.plugins.base import (
    Obj,
    Plugin,
    Pod,
    ResourceRef,
    add_mount,
    add_volume,
    all_containers,
    copy_pod,
    object_meta,
    task_hosts,
)

__all__ = [
    "AUTHORIZED_KEYS",
    "PRIVATE_KEY",
    "PUBLIC_KEY",
    "SSH_CONFIG",
    "KeyPairMissingError",
    "SSHKeyPair",
    "SSHPlugin",
    "generate_key_pair",
    "key_pair_from_secret",
    "secret_name",
    "ssh_config",
    "ssh_secret",
]

PRIVATE_KEY: Final = "id_rsa"
PUBLIC_KEY: Final = "id_rsa.pub"
AUTHORIZED_KEYS: Final = "authorized_keys"
SSH_CONFIG: Final = "config"
RELATIVE_PATH: Final = ".ssh"
RSA_BITS: Final = 2048
DEFAULT_MODE: Final = 0o600
NON_DEFAULT_PATH_MODE: Final = 0o644


class SSHKeyPair:
    """A private key (PEM) and its public key (authorized_keys line); the repr hides the key.

    A plain class on purpose: msgspec and dataclass helpers cannot serialise it by accident.
    """

    __slots__ = ("_private", "public_key")

    def __init__(self, private_key_pem: bytes, public_key: bytes) -> None:
        self._private = private_key_pem
        self.public_key = public_key

    @property
    def private_key_pem(self) -> bytes:
        """The private key, PEM encoded. Never log it."""
        return self._private

    def __repr__(self) -> str:
        return f"SSHKeyPair(private_key=<redacted>, public_key={self.public_key!r})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SSHKeyPair):
            return NotImplemented
        return self._private == other._private and self.public_key == other.public_key

    def __hash__(self) -> int:
        return hash((self._private, self.public_key))


class _Redacted(dict[str, Any]):
    """A dict (it encodes like one) whose repr does not show its values: Secret data."""

    def __repr__(self) -> str:
        return f"<redacted: {', '.join(sorted(self))}>"

    __str__ = __repr__


class _SecretObject(dict[str, Any]):
    """The Secret as a dict whose repr shows only its identity."""

    def __repr__(self) -> str:
        meta = self.get("metadata") or {}
        return f"<Secret {meta.get('namespace')}/{meta.get('name')}: data redacted>"

    __str__ = __repr__


class KeyPairMissingError(LookupError):
    """The ssh plugin was asked for its Secret without a key pair (a controller bug)."""


def generate_key_pair() -> SSHKeyPair:
    """A fresh RSA 2048 key pair in Volcano's formats. Random and CPU-bound: not pure."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # PKCS#1 "RSA PRIVATE KEY"
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return SSHKeyPair(private, public + b"\n")


def key_pair_from_secret(data: Mapping[str, str]) -> SSHKeyPair | None:
    """The key pair stored in an existing Secret's `data` (base64 values), or None if incomplete.

    Lets a reconcile keep the keys a job already has instead of generating new ones.
    """
    try:
        private = base64.b64decode(data[PRIVATE_KEY], validate=True)
        public = base64.b64decode(data[PUBLIC_KEY], validate=True)
    except (KeyError, binascii.Error, ValueError):
        return None
    if not private or not public:
        return None
    return SSHKeyPair(private, public)


def _derive_public_key(private_pem: bytes) -> str:
    """The authorized_keys line of a PEM (PKCS#1/PKCS#8) or OpenSSH private key, or ""."""
    loaders = (serialization.load_pem_private_key, serialization.load_ssh_private_key)
    for load in loaders:
        try:
            key = load(private_pem, password=None)
            public = key.public_key().public_bytes(
                serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
            )
        except (ValueError, TypeError, AttributeError, UnsupportedAlgorithm):
            continue
        return public.decode()
    return ""


def _user_key_pair(options: SSHOptions) -> SSHKeyPair | None:
    if not options.private_key:
        return None
    public = options.public_key
    if not public:
        # Volcano writes an empty id_rsa.pub then; deriving it makes authorized_keys useful.
        public = _derive_public_key(options.private_key.encode())
    if public and not public.endswith("\n"):
        public += "\n"
    return SSHKeyPair(options.private_key.encode(), public.encode())


def secret_name(job: Job) -> str:
    """`<job>-ssh`, also the name of the pod volume."""
    return f"{job.metadata.name}-ssh"


def ssh_config(job: Job, port: int = 22) -> str:
    """The `config` file: no host key checks, then one stanza per pod of the job."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in job.spec.tasks:
        for host in task_hosts(job, task):
            short = host.split(".", 1)[0]
            lines += [f"Host {short}", f"  HostName {host}", f"  Port {port}"]
    return "\n".join(lines) + "\n"


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def ssh_secret(job: Job, key_pair: SSHKeyPair, options: SSHOptions | None = None) -> Obj:
    """Secret `<job>-ssh` with the key pair and the ssh config. Pure: the keys are an input."""
    opts = options or SSHOptions()
    data = _Redacted(
        {
            PRIVATE_KEY: _b64(key_pair.private_key_pem),
            PUBLIC_KEY: _b64(key_pair.public_key),
            AUTHORIZED_KEYS: _b64(key_pair.public_key),
            SSH_CONFIG: _b64(ssh_config(job, opts.port).encode()),
        }
    )
    return _SecretObject(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": object_meta(job, secret_name(job)),
            "type": "Opaque",
            "data": data,
        }
    )


@dataclass(frozen=True)
class SSHPlugin(Plugin):
    """Password-less ssh between the job's pods."""

    name: ClassVar[str] = "ssh"
    options: SSHOptions = field(default_factory=SSHOptions)
    # The job's generated key pair, when the I/O layer has one; repr=False keeps it out of logs.
    key_pair: SSHKeyPair | None = field(default=None, repr=False, compare=False)

    @property
    def needs_key_pair(self) -> bool:
        """Whether `resources` needs a generated key pair (the user gave no keys, none set yet)."""
        return self.key_pair is None and not self.options.private_key

    def with_key_pair(self, key_pair: SSHKeyPair) -> SSHPlugin:
        """This plugin with the job's key pair."""
        return SSHPlugin(options=self.options, key_pair=key_pair)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod with the Secret mounted at the key path in every container."""
        out = copy_pod(pod)
        name = secret_name(job)
        default_path = self.options.key_file_path == DEFAULT_SSH_KEY_PATH
        add_volume(
            out,
            {
                "name": name,
                "secret": {
                    "secretName": name,
                    "items": [
                        {"key": key, "path": f"{RELATIVE_PATH}/{key}"}
                        for key in (PRIVATE_KEY, PUBLIC_KEY, AUTHORIZED_KEYS, SSH_CONFIG)
                    ],
                    "defaultMode": DEFAULT_MODE if default_path else NON_DEFAULT_PATH_MODE,
                },
            },
        )
        mount = {"name": name, "mountPath": self.options.key_file_path, "subPath": RELATIVE_PATH}
        for container in all_containers(out):
            add_mount(container, mount)
        return out

    def resources(self, job: Job) -> list[Obj]:
        """The Secret. Raises `KeyPairMissingError` if neither the user nor the caller gave keys."""
        key_pair = _user_key_pair(self.options) or self.key_pair
        if key_pair is None:
            raise KeyPairMissingError(
                "the ssh plugin needs a key pair: pass key_pair_from_secret(...) or "
                "generate_key_pair() to build_plugins(ssh_key_pair=...)"
            )
        return [ssh_secret(job, key_pair, self.options)]

    def resource_refs(self, job: Job) -> list[ResourceRef]:
        """Secret `<job>-ssh`."""
        return [ResourceRef("v1", "Secret", job.metadata.namespace, secret_name(job))]
