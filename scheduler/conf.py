"""The scheduler's configuration file, in Volcano's format:

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
        enablePreemptable: false
    - plugins:
      - name: binpack
        arguments: {binpack.weight: 10}
    configurations:
    - name: preempt
      arguments: {...}

Parsing is pure and strict: an unknown action or plugin, a wrong type or an unknown key is an
error naming the line and the key, so a typo never silently changes scheduling.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import yaml

# SchedulerConf lives with the framework that runs it (the framework does not import this
# parser); it is re-exported here for the process, the simulator and the benches.
from scheduler.framework.plugin import Arguments, PluginOption
from scheduler.framework.plugin import SchedulerConf as SchedulerConf
from scheduler.node_load import metrics_source

DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


class ConfError(ValueError):
    """A configuration the scheduler refuses; the message names the line and key."""


def _where(node: yaml.Node) -> str:
    return f"line {node.start_mark.line + 1}"


def _mapping(node: yaml.Node, what: str) -> list[tuple[str, yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        raise ConfError(f"{_where(node)}: {what} must be a mapping")
    items: list[tuple[str, yaml.Node, yaml.Node]] = []
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            raise ConfError(f"{_where(key)}: keys of {what} must be strings")
        items.append((str(key.value), key, value))
    return items


def _plain(node: yaml.Node) -> Any:
    return yaml.safe_load(yaml.serialize(node))


def parse_conf(text: str, *, actions: Collection[str], plugins: Collection[str]) -> SchedulerConf:
    """Parse and check a configuration against the known action and plugin names."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise ConfError(f"not valid YAML: {exc}") from None
    if root is None:
        raise ConfError("the configuration is empty")
    found_actions: tuple[str, ...] = ()
    tiers: list[tuple[PluginOption, ...]] = []
    action_args: dict[str, Mapping[str, Any]] = {}
    metrics: dict[str, Any] = {}
    for key, key_node, value in _mapping(root, "the configuration"):
        if key == "actions":
            if not isinstance(value, yaml.ScalarNode):
                raise ConfError(
                    f'{_where(value)}: actions must be a string like "enqueue, allocate"'
                )
            names = tuple(a.strip() for a in str(value.value).split(",") if a.strip())
            unknown = [a for a in names if a not in actions]
            if unknown:
                raise ConfError(
                    f"{_where(value)}: unknown action {', '.join(unknown)}; "
                    f"known: {', '.join(sorted(actions))}"
                )
            found_actions = names
        elif key == "tiers":
            if not isinstance(value, yaml.SequenceNode):
                raise ConfError(f"{_where(value)}: tiers must be a list")
            for tier in value.value:
                tiers.append(_tier(tier, plugins))
        elif key == "configurations":
            if not isinstance(value, yaml.SequenceNode):
                raise ConfError(f"{_where(value)}: configurations must be a list")
            for entry in value.value:
                fields = {k: v for k, _, v in _mapping(entry, "a configuration")}
                name_node = fields.get("name")
                if name_node is None or not isinstance(name_node, yaml.ScalarNode):
                    raise ConfError(f"{_where(entry)}: a configuration needs a name")
                if name_node.value not in actions:
                    raise ConfError(
                        f"{_where(name_node)}: configuration for unknown action {name_node.value}"
                    )
                args = _plain(fields["arguments"]) if "arguments" in fields else {}
                action_args[str(name_node.value)] = args or {}
        elif key == "metrics":
            # Volcano's metrics source: where the usage plugin's node load comes from.
            section = _plain(value)
            if not isinstance(section, dict):
                raise ConfError(f"{_where(value)}: metrics must be a mapping")
            try:
                metrics_source(section)
            except ValueError as exc:
                raise ConfError(f"{_where(value)}: {exc}") from None
            metrics = section
        else:
            raise ConfError(
                f"{_where(key_node)}: unknown key {key!r}; "
                "use actions, tiers, configurations, metrics"
            )
    if not found_actions:
        raise ConfError("the configuration names no actions")
    _check_exclusive(tiers)
    conf = SchedulerConf(found_actions, tuple(tiers), action_args, metrics)
    _check_arguments(conf, actions, plugins)
    return conf


def _check_arguments(
    conf: SchedulerConf, actions: Collection[str], plugins: Collection[str]
) -> None:
    """Build each configured plugin and action once when their factories are given (the
    registry's mappings): a bad argument is refused when the file is loaded, naming the plugin
    and the argument, rather than failing every session the scheduler opens."""
    if isinstance(plugins, Mapping):
        for tier in conf.tiers:
            for option in tier:
                try:
                    plugins[option.name](Arguments(option.name, option.arguments))
                except (ValueError, TypeError) as exc:
                    raise ConfError(str(exc)) from None
    if isinstance(actions, Mapping):
        for name in conf.actions:
            try:
                actions[name](conf.action_arguments.get(name, {}))
            except (ValueError, TypeError) as exc:
                raise ConfError(f"action {name}: {exc}") from None


# Plugins that divide the cluster between queues in incompatible ways: one at most.
EXCLUSIVE = ("proportion", "capacity")


def _check_exclusive(tiers: Sequence[Sequence[PluginOption]]) -> None:
    named = [option.name for tier in tiers for option in tier if option.name in EXCLUSIVE]
    if len(set(named)) > 1:
        raise ConfError(
            "plugins proportion and capacity both share the cluster between queues (by weight, "
            "and by each queue's deserved resources); configure one of them"
        )


def _tier(node: yaml.Node, plugins: Collection[str]) -> tuple[PluginOption, ...]:
    fields = {k: v for k, _, v in _mapping(node, "a tier")}
    plugin_list = fields.get("plugins")
    if not isinstance(plugin_list, yaml.SequenceNode):
        raise ConfError(f"{_where(node)}: a tier needs a list of plugins")
    options = []
    for entry in plugin_list.value:
        name = ""
        arguments: dict[str, Any] = {}
        switches: dict[str, bool] = {}
        for key, key_node, value in _mapping(entry, "a plugin"):
            if key == "name":
                name = str(value.value)
                if name not in plugins:
                    raise ConfError(
                        f"{_where(value)}: unknown plugin {name}; "
                        f"known: {', '.join(sorted(plugins))}"
                    )
            elif key == "arguments":
                args = _plain(value)
                if args is not None and not isinstance(args, dict):
                    raise ConfError(f"{_where(value)}: arguments of a plugin must be a mapping")
                arguments = dict(args or {})
            elif key.startswith(("enable", "enabled")):
                flag = _plain(value)
                if not isinstance(flag, bool):
                    raise ConfError(f"{_where(value)}: {key} must be true or false, got {flag!r}")
                switches[key] = flag
            else:
                raise ConfError(f"{_where(key_node)}: unknown key {key!r} for a plugin")
        if not name:
            raise ConfError(f"{_where(entry)}: a plugin needs a name")
        options.append(PluginOption(name, arguments, switches))
    return tuple(options)
