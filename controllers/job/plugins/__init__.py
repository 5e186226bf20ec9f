"""Job plugins: env, svc, ssh, tensorflow, pytorch, mpi, ray, hcclrank (Volcano's
pkg/controllers/job/plugins/), and mxnet (Caldera's; docs/compatibility.md).

`build_plugins(job)` is the registry: it adds the plugins the job needs (svc for the
frameworks, ssh for mpi, never touching what the user set), parses every plugin's arguments and
returns a `PluginSet` holding either the plugins, in a fixed order, or the errors, one per bad
plugin (or per thing a plugin cannot do with this Job: ray without its head task), for a
`PluginError` Event on the Job. It never raises for a bad spec.

How the job controller's I/O layer uses it (everything here is pure; the caller does the I/O):

    plugins = build_plugins(job)
    if not plugins.ok:      # bad arguments or unknown plugins: permanent until the spec changes
        record a Warning Event, reason JobEventReason.PLUGIN_ERROR, message plugins.message,
        and create no pods (do not requeue: retrying cannot help)
    # once per sync of the Job (never per pod), before pods are created:
    if plugins.needs_ssh_key_pair:
        secret = GET Secret ssh.secret_name(job) in the Job's namespace (None on 404)
        a Secret the Job does not control is a clash: its keys are never read
        pair = key_pair_from_secret(secret.data) if secret else None
        if pair is None:
            pair = await asyncio.to_thread(generate_key_pair)   # ~50-100 ms of CPU
        plugins = plugins.with_ssh_key_pair(pair)
    for obj in plugins.resources(job):
        GET it (POST when absent): another owner's object is a clash (a Warning Event, no pod
        is made, the object is left alone); the Job's own is PATCHed (with its uid) only if
        plugins.update_on_change(obj) (the svc hosts ConfigMap, which follows scaling) and
        its content differs
    status.controlledResources |= plugins.controlled_resources(job)
    for each missing pod:
        pod = plugins.on_pod_create(job, build_pod(job, task, index).pod, task.name, index)
    on a kill that ends the PodGroup, once, for the plugins controlledResources records: for
        ref in plugin.resource_refs(job): GET, DELETE with its uid if the Job controls it; the
        entries are dropped (the ownerReferences let Kubernetes' GC collect them anyway)

``controllers.job.plugin_objects`` is that I/O, and ``caldera.api.ownership`` the rule.

Reusing the existing Secret's pair keeps the keys stable across reconciles, and the key pair is
the only non-deterministic input: with the same Job and pair, every call returns equal objects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, assert_never

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
    plugin_job_errors,
    with_required_plugins,
)
from caldera.api.volcano import Job
from controllers.job.plugins.base import Obj, Plugin, Pod, ResourceRef, copy_pod
from controllers.job.plugins.env import EnvPlugin
from controllers.job.plugins.hcclrank import HCCLRankPlugin
from controllers.job.plugins.mpi import MPIPlugin
from controllers.job.plugins.mxnet import MXNetPlugin
from controllers.job.plugins.pytorch import PytorchPlugin
from controllers.job.plugins.ray import RayPlugin
from controllers.job.plugins.ssh import (
    KeyPairMissingError,
    SSHKeyPair,
    SSHPlugin,
    generate_key_pair,
    key_pair_from_secret,
)
from controllers.job.plugins.svc import SvcPlugin
from controllers.job.plugins.tensorflow import TensorflowPlugin

__all__ = [
    "PLUGIN_ORDER",
    "KeyPairMissingError",
    "Plugin",
    "PluginError",
    "PluginSet",
    "ResourceRef",
    "SSHKeyPair",
    "build_plugins",
    "generate_key_pair",
    "key_pair_from_secret",
    "make_plugin",
]

PLUGIN_ORDER: Final = IMPLEMENTED_PLUGINS


@dataclass(frozen=True, slots=True)
class PluginError:
    """A plugin of the job that cannot run, and why (names the plugin and the argument)."""

    plugin: str
    message: str


@dataclass(frozen=True)
class PluginSet:
    """The job's plugins in application order, or the errors that stop them.

    Exactly one of `plugins` and `errors` is non-empty, unless the job has no plugins at all.
    """

    plugins: tuple[Plugin, ...] = ()
    errors: tuple[PluginError, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every plugin parsed."""
        return not self.errors

    @property
    def message(self) -> str:
        """The errors as one Event message, Volcano-style `...;`-joined fragments."""
        return " ".join(f"{e.message};" for e in self.errors)

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the plugins, in order."""
        return tuple(p.name for p in self.plugins)

    def get(self, name: str) -> Plugin | None:
        """The plugin called `name`, or None."""
        for plugin in self.plugins:
            if plugin.name == name:
                return plugin
        return None

    @property
    def needs_ssh_key_pair(self) -> bool:
        """Whether the ssh plugin is present and still needs a generated key pair."""
        ssh = self.get(SSHPlugin.name)
        return isinstance(ssh, SSHPlugin) and ssh.needs_key_pair

    def with_ssh_key_pair(self, key_pair: SSHKeyPair) -> PluginSet:
        """The same set with the ssh plugin holding `key_pair` (no change without ssh)."""
        plugins = tuple(
            p.with_key_pair(key_pair) if isinstance(p, SSHPlugin) else p for p in self.plugins
        )
        return replace(self, plugins=plugins)

    def on_pod_create(self, job: Job, pod: Pod, task_name: str, index: int) -> Pod:
        """The pod after every plugin, in order; a new dict, `pod` is untouched."""
        out = pod
        for plugin in self.plugins:
            out = plugin.on_pod_create(job, out, task_name, index)
        return out if self.plugins else copy_pod(pod)

    def resources(self, job: Job) -> list[Obj]:
        """Every plugin's desired objects."""
        return [obj for plugin in self.plugins for obj in plugin.resources(job)]

    def resource_refs(self, job: Job) -> list[ResourceRef]:
        """Every plugin's objects, by name, for deletion."""
        return [ref for plugin in self.plugins for ref in plugin.resource_refs(job)]

    def controlled_resources(self, job: Job) -> dict[str, str]:
        """The `status.controlledResources` entries of every plugin."""
        out: dict[str, str] = {}
        for plugin in self.plugins:
            out.update(plugin.controlled_resources(job))
        return out

    def update_on_change(self, obj: Obj) -> bool:
        """Whether an existing object like `obj` should be overwritten (else create-if-absent)."""
        kind = obj.get("kind")
        return any(kind in p.UPDATE_ON_CHANGE for p in self.plugins)


def make_plugin(options: PluginOptions, *, ssh_key_pair: SSHKeyPair | None = None) -> Plugin:
    """The plugin for parsed options."""
    if isinstance(options, EnvOptions):
        return EnvPlugin(options)
    if isinstance(options, SvcOptions):
        return SvcPlugin(options)
    if isinstance(options, SSHOptions):
        return SSHPlugin(options, ssh_key_pair)
    if isinstance(options, TensorflowOptions):
        return TensorflowPlugin(options)
    if isinstance(options, PytorchOptions):
        return PytorchPlugin(options)
    if isinstance(options, MPIOptions):
        return MPIPlugin(options)
    if isinstance(options, MXNetOptions):
        return MXNetPlugin(options)
    if isinstance(options, RayOptions):
        return RayPlugin(options)
    if isinstance(options, HCCLRankOptions):
        return HCCLRankPlugin(options)
    assert_never(options)


def build_plugins(job: Job, *, ssh_key_pair: SSHKeyPair | None = None) -> PluginSet:
    """The plugins of `job` (with the ones it requires), or why they cannot run.

    Never raises for a bad spec. Plugins run in `PLUGIN_ORDER`; unknown or unsupported plugins,
    bad arguments and what a plugin cannot do with this Job become `PluginError`s, and then no
    plugin is returned (a job with half its plugins would get broken pods). `ssh_key_pair` is
    the job's key pair when the caller has one (see `PluginSet.with_ssh_key_pair`).
    """
    wanted = with_required_plugins(job.spec.plugins)
    order = [n for n in PLUGIN_ORDER if n in wanted] + sorted(set(wanted) - set(PLUGIN_ORDER))
    plugins: list[Plugin] = []
    errors: list[PluginError] = []
    for name in order:
        try:
            options = parse_plugin_args(name, wanted[name])
        except PluginArgumentError as exc:
            errors.append(PluginError(name, str(exc)))
            continue
        problems = plugin_job_errors(options, job)
        if problems:
            errors.extend(PluginError(name, problem) for problem in problems)
            continue
        plugins.append(make_plugin(options, ssh_key_pair=ssh_key_pair))
    if errors:
        return PluginSet(errors=tuple(errors))
    return PluginSet(plugins=tuple(plugins))
