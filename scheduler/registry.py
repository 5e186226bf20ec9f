"""The actions and plugins this scheduler build provides, by the names configurations use.

Explicit, not registered at import time: the process and the tests build exactly this table.
"""

from __future__ import annotations

from scheduler.actions.allocate import AllocateAction
from scheduler.actions.backfill import BackfillAction
from scheduler.actions.enqueue import EnqueueAction
from scheduler.actions.gangpreempt import GangPreemptAction
from scheduler.actions.gangreclaim import GangReclaimAction
from scheduler.actions.preempt import PreemptAction
from scheduler.actions.reclaim import ReclaimAction
from scheduler.actions.reservation_preempt import ReservationPreemptAction
from scheduler.actions.shuffle import ShuffleAction
from scheduler.extender_http import HttpTransport
from scheduler.framework.runner import ActionFactory, PluginFactory, Registry
from scheduler.plugins.binpack import BinpackPlugin
from scheduler.plugins.capacity import CapacityPlugin
from scheduler.plugins.cdp import CooldownProtectionPlugin
from scheduler.plugins.conformance import ConformancePlugin
from scheduler.plugins.drf import DrfPlugin
from scheduler.plugins.extender import ExtenderPlugin
from scheduler.plugins.gang import GangPlugin
from scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from scheduler.plugins.nodegroup import NodeGroupPlugin
from scheduler.plugins.nodeorder import NodeOrderPlugin
from scheduler.plugins.numa_aware import NumaAwarePlugin
from scheduler.plugins.overcommit import OvercommitPlugin
from scheduler.plugins.pdb import PdbPlugin
from scheduler.plugins.predicates import PredicatesPlugin
from scheduler.plugins.preemption_toleration import PreemptionTolerationPlugin
from scheduler.plugins.priority import PriorityPlugin
from scheduler.plugins.proportion import ProportionPlugin
from scheduler.plugins.rescheduling import ReschedulingPlugin
from scheduler.plugins.reservation import ReservationPlugin
from scheduler.plugins.resource_strategy_fit import ResourceStrategyFitPlugin
from scheduler.plugins.resourcequota import ResourceQuotaPlugin
from scheduler.plugins.sla import SlaPlugin
from scheduler.plugins.task_topology import TaskTopologyPlugin
from scheduler.plugins.tdm import TdmPlugin
from scheduler.plugins.usage import UsagePlugin

PLUGINS: dict[str, PluginFactory] = {
    cls.name: cls
    for cls in (
        GangPlugin,
        PriorityPlugin,
        DrfPlugin,
        ProportionPlugin,
        BinpackPlugin,
        NodeOrderPlugin,
        PredicatesPlugin,
        TaskTopologyPlugin,
        ConformancePlugin,
        OvercommitPlugin,
        PreemptionTolerationPlugin,
        CapacityPlugin,
        ResourceQuotaPlugin,
        SlaPlugin,
        PdbPlugin,
        NetworkTopologyAwarePlugin,
        CooldownProtectionPlugin,
        NodeGroupPlugin,
        ResourceStrategyFitPlugin,
        ReschedulingPlugin,
        UsagePlugin,
        NumaAwarePlugin,
        TdmPlugin,
        ReservationPlugin,
    )
}
# The one plugin that talks to something: it is given its HTTP transport here.
PLUGINS[ExtenderPlugin.name] = lambda args: ExtenderPlugin(args, HttpTransport)

ACTIONS: dict[str, ActionFactory] = {
    cls.name: cls
    for cls in (
        EnqueueAction,
        AllocateAction,
        BackfillAction,
        PreemptAction,
        ReclaimAction,
        GangPreemptAction,
        GangReclaimAction,
        ShuffleAction,
        ReservationPreemptAction,
    )
}

REGISTRY = Registry(plugins=PLUGINS, actions=ACTIONS)
