"""What a scheduler plugin and an action are, the kinds of callback a plugin registers, and the
arguments a configuration gives them."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scheduler.framework.session import Session


class CallbackKind(enum.Enum):
    """The kinds of callback a plugin registers on the session (``Session.add_*_fn``), each
    with the configuration switch that turns it off for one plugin (Volcano's names)."""

    JOB_ORDER = ("job_order", "enableJobOrder")
    QUEUE_ORDER = ("queue_order", "enableQueueOrder")
    TASK_ORDER = ("task_order", "enableTaskOrder")
    VICTIM_ORDER = ("victim_order", "enabledVictim")
    # Volcano's victim queue order functions have no switch of their own.
    VICTIM_QUEUE_ORDER = ("victim_queue_order", "")
    PREDICATE = ("predicate", "enablePredicate")
    NODE_ORDER = ("node_order", "enableNodeOrder")
    # Scores of a task over the nodes that passed the predicates, all at once (Volcano's
    # BatchNodeOrderFn: scores normalised across nodes, as kube-scheduler's InterPodAffinity).
    BATCH_NODE_ORDER = ("batch_node_order", "enableNodeOrder")
    # Whether a task's predicate or scores on a node read other nodes too (pods elsewhere in
    # the node's topology domain): the placer then judges every node afresh for that task.
    # A declaration of correctness, not a speed-up: no switch.
    CROSS_NODE = ("cross_node", "")
    JOB_READY = ("job_ready", "enableJobReady")
    JOB_PIPELINED = ("job_pipelined", "enableJobPipelined")
    JOB_VALID = ("job_valid", "enableJobValid")
    JOB_ENQUEUEABLE = ("job_enqueueable", "enableJobEnqueued")
    JOB_ENQUEUED = ("job_enqueued", "enableJobEnqueued")
    JOB_STARVING = ("job_starving", "enableJobStarving")
    PREEMPTABLE = ("preemptable", "enablePreemptable")
    RECLAIMABLE = ("reclaimable", "enableReclaimable")
    PREEMPTIVE = ("preemptive", "enablePreemptive")
    OVERUSED = ("overused", "enabledOverused")
    ALLOCATABLE = ("allocatable", "enabledAllocatable")
    # The shuffle action's: the pods a plugin would evict (rescheduling), and the screen a
    # plugin passes them through (pdb); Volcano's VictimTasks, switched by enabledVictim.
    VICTIM_TASKS = ("victim_tasks", "enabledVictim")
    VICTIM_TASKS_SCREEN = ("victim_tasks_screen", "enabledVictim")
    # allocate/deallocate handlers (Volcano's event handlers): no switch, always registered.
    ALLOCATE_HANDLER = ("allocate_handler", "")

    def __init__(self, label: str, switch: str) -> None:
        self.label = label
        self.switch = switch

    # Hashed by identity (in C), not by name as Enum does (in Python): the session looks its
    # callbacks up by kind per pod and node.
    __hash__ = object.__hash__


@dataclass(frozen=True)
class PluginOption:
    """One plugin of one tier, as the configuration file names it."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    # enableJobOrder, enablePreemptable, ... (Volcano's switches; absent means enabled)
    switches: Mapping[str, bool] = field(default_factory=dict)

    def enabled(self, switch: str) -> bool:
        return self.switches.get(switch, True)


@dataclass(frozen=True)
class SchedulerConf:
    """What a session runs: the actions in order, the plugin tiers and the actions' arguments
    (scheduler.conf parses it from the configuration file)."""

    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginOption, ...], ...]
    action_arguments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Volcano's ``metrics:`` section as given (``scheduler.node_load`` reads it).
    metrics: Mapping[str, Any] = field(default_factory=dict)


class Plugin(Protocol):
    """A plugin registers callbacks on the session when it opens, and may write state (status,
    events) when it closes. It must not do I/O: the session's results carry every decision."""

    name: str

    def on_session_open(self, ssn: Session) -> None: ...

    def on_session_close(self, ssn: Session) -> None: ...


class Action(Protocol):
    """An action (enqueue, allocate, ...) runs once per session over the session's state."""

    name: str

    def execute(self, ssn: Session) -> None: ...


class Arguments:
    """Typed access to a plugin's arguments, with errors that name the plugin and the key."""

    def __init__(self, plugin: str, raw: Mapping[str, Any]) -> None:
        self.plugin, self.raw = plugin, raw

    def number(self, key: str, default: float) -> float:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(
                f"plugin {self.plugin}: argument {key} must be a number, got {value!r}"
            )
        try:
            return float(value)
        except ValueError:
            raise ValueError(
                f"plugin {self.plugin}: argument {key} must be a number, got {value!r}"
            ) from None

    def integer(self, key: str, default: int) -> int:
        value = self.number(key, default)
        if value != int(value):
            raise ValueError(
                f"plugin {self.plugin}: argument {key} must be a whole number, got {value!r}"
            )
        return int(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw.get(key, default)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError(
            f"plugin {self.plugin}: argument {key} must be true or false, got {value!r}"
        )

    def string(self, key: str, default: str) -> str:
        value = self.raw.get(key, default)
        if not isinstance(value, str):
            raise ValueError(
                f"plugin {self.plugin}: argument {key} must be a string, got {value!r}"
            )
        return value
