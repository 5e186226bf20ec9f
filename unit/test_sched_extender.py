"""The extender plugin (Volcano's HTTP scheduler extender) over a fake transport: its
arguments, what it sends (Volcano's Go field names), how answers and failures act on the
session, and that a failing extender costs one call per session."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from scheduler.api.types import ClusterInfo, TaskInfo
from scheduler.framework.plugin import Arguments, PluginOption, SchedulerConf
from scheduler.framework.runner import Registry, run_session
from scheduler.framework.session import Session
from scheduler.plugins.extender import (
    ABSTAIN,
    PERMIT,
    REJECT,
    ExtenderConfig,
    ExtenderError,
    ExtenderPlugin,
    encode_task,
    parse_config,
)
from scheduler.registry import REGISTRY
from unit.sched_fixtures import add_job, binds, cpu_cluster, make_task, open_session

URL = "http://extender.example:8888/api"
Answer = Callable[[str, dict[str, Any]], Any]


class FakeExtender:
    """Answers calls with ``answer(verb, request)``: a dict (the JSON answer) or an exception
    to raise (as the HTTP transport raises ExtenderError). Records every call."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def factory(self, config: ExtenderConfig) -> Callable[[str, bytes], bytes]:
        def transport(verb: str, body: bytes) -> bytes:
            request = json.loads(body)
            self.calls.append((verb, request))
            result = self.answer(verb, request)
            if isinstance(result, Exception):
                raise result
            return json.dumps(result).encode()

        return transport

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.calls]


def arguments(**extra: Any) -> dict[str, Any]:
    return {"extender.urlPrefix": URL, **{f"extender.{k}": v for k, v in extra.items()}}


def run_with(
    cluster: ClusterInfo,
    fake: FakeExtender,
    args: Mapping[str, Any],
    actions: tuple[str, ...] = ("enqueue", "allocate"),
) -> Session:
    """One session of Volcano's default tiers plus the extender over ``fake``."""
    plugins = dict(REGISTRY.plugins)
    plugins["extender"] = lambda a: ExtenderPlugin(a, fake.factory)
    registry = Registry(plugins=plugins, actions=REGISTRY.actions)
    tiers = (
        (PluginOption("priority"), PluginOption("gang"), PluginOption("conformance")),
        (
            PluginOption("predicates"),
            PluginOption("proportion"),
            PluginOption("nodeorder"),
            PluginOption("extender", args),
        ),
    )
    conf = SchedulerConf(actions=actions, tiers=tiers)
    ssn = Session(cluster, conf.tiers)
    run_session(ssn, conf, registry)
    return ssn


def _answer(result: dict[str, Any]) -> Answer:
    return lambda verb, req: result


def three_nodes() -> ClusterInfo:
    return cpu_cluster({"n0": "4", "n1": "4", "n2": "4"})


# --- arguments --------------------------------------------------------------------------------


def test_defaults_and_verbs() -> None:
    """Volcano's keys; httpTimeout defaults to 1s; managedResources as a list."""
    config = parse_config(
        Arguments(
            "extender",
            arguments(
                predicateVerb="filter",
                httpTimeout="250ms",
                ignorable=True,
                managedResources=["nvidia.com/gpu"],
            ),
        )
    )
    assert config.url_prefix == URL
    assert config.http_timeout == 0.25
    assert config.ignorable is True
    assert config.managed_resources == frozenset({"nvidia.com/gpu"})
    assert config.verb("predicateVerb") == "filter"
    assert config.verb("prioritizeVerb") == ""
    assert parse_config(Arguments("extender", arguments())).http_timeout == 1.0


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"extender.urlPrefix": ""}, "extender.urlPrefix must be an http:// or https:// URL"),
        ({"extender.urlPrefix": "file:///etc/passwd"}, "extender.urlPrefix must be"),
        (arguments(httpTimeout="soon"), "extender.httpTimeout: invalid duration"),
        (arguments(httpTimeout="1h"), "extender.httpTimeout must be more than 0 and at most 10s"),
        (arguments(httpTimeout="0s"), "extender.httpTimeout must be more than 0"),
        (
            arguments(sessionBudget="2m"),
            "extender.sessionBudget must be more than 0 and at most 60s",
        ),
        (arguments(predicateVerb="../admin"), "extender.predicateVerb must be a URL path"),
        (arguments(predicateVerb="a?b=c"), "extender.predicateVerb must be a URL path"),
        (arguments(onSessionOpenVerb="open"), "extender.onSessionOpenVerb is not supported"),
        (arguments(allocateFuncVerb="alloc"), "extender.allocateFuncVerb is not supported"),
        (arguments(managedResources=[1]), "extender.managedResources must be a list"),
        (arguments(predicateverb="x"), "unknown argument extender.predicateverb"),
        (arguments(ignorable="maybe"), "extender.ignorable must be true or false"),
    ],
)
def test_bad_arguments_name_the_key(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=r"^plugin extender: ") as info:
        parse_config(Arguments("extender", raw))
    assert fragment in str(info.value)


# --- the wire ---------------------------------------------------------------------------------


def test_a_task_is_sent_with_volcanos_field_names() -> None:
    """UID, Job, Name, Namespace, TaskRole, Resreq with MilliCPU/Memory (bytes), Status as
    Volcano's bit (Pending = 1), the pod as Kubernetes writes it."""
    task = make_task("train", 0, {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "2"})
    sent = encode_task(task)
    assert sent["UID"] == task.uid
    assert sent["Name"] == "train-0"
    assert sent["Namespace"] == "ns"
    assert sent["Resreq"] == {
        "MilliCPU": 1500.0,
        "Memory": float(1 << 30),
        "ScalarResources": {"nvidia.com/gpu": 2000.0},
        "MaxTaskNum": 0,
    }
    assert sent["Status"] == 1
    assert sent["Pod"]["metadata"]["name"] == "train-0"
    json.dumps(sent)  # JSON all through


# --- answers ----------------------------------------------------------------------------------


def test_predicate_keeps_pods_off_refused_nodes() -> None:
    """The extender refuses every node but n1: the job's pods all go to n1."""
    cluster = three_nodes()
    add_job(cluster, "a", pending=2, min_available=2)
    fake = FakeExtender(
        lambda verb, req: {"status": "" if req["node"]["Name"] == "n1" else "no GPU driver"}
    )
    ssn = run_with(cluster, fake, arguments(predicateVerb="filter"))
    assert binds(ssn) == {"a-0": "n1", "a-1": "n1"}
    assert set(fake.verbs()) == {"filter"}
    assert {req["task"]["Name"] for _, req in fake.calls} == {"a-0", "a-1"}


def test_prioritize_is_asked_once_per_task_and_scores_decide() -> None:
    """nodeScore favours n2 by far: both pods go there, with one call per task."""
    cluster = three_nodes()
    add_job(cluster, "a", pending=2, min_available=2)
    fake = FakeExtender(
        lambda verb, req: {"nodeScore": {"n0": 0, "n1": 1, "n2": 1000}, "errorMessage": ""}
    )
    ssn = run_with(cluster, fake, arguments(prioritizeVerb="score"))
    assert binds(ssn) == {"a-0": "n2", "a-1": "n2"}
    assert fake.verbs() == ["score", "score"]
    assert [n["Name"] for n in fake.calls[0][1]["nodes"]] == ["n0", "n1", "n2"]


def test_a_failing_extender_refuses_and_is_called_once_per_session() -> None:
    """Not ignorable: an extender that fails refuses every node (nothing binds, the reason
    names the extender), and after the first failure the session calls it no more."""
    cluster = three_nodes()
    job = add_job(cluster, "a", pending=2, min_available=2)
    fake = FakeExtender(lambda verb, req: ExtenderError("timed out"))
    ssn = run_with(cluster, fake, arguments(predicateVerb="filter", prioritizeVerb="score"))
    assert binds(ssn) == {}
    assert len(fake.calls) == 1
    reasons = " ".join(job.fit_errors.values())
    assert "extender filter: timed out" in reasons


def test_an_ignorable_extender_that_fails_changes_nothing() -> None:
    """Ignorable: the same failure lets the pods bind as without the extender."""
    cluster = three_nodes()
    add_job(cluster, "a", pending=2, min_available=2)
    fake = FakeExtender(lambda verb, req: ExtenderError("connection refused"))
    ssn = run_with(cluster, fake, arguments(predicateVerb="filter", ignorable=True))
    assert len(binds(ssn)) == 2
    assert len(fake.calls) == 1


def test_a_non_json_answer_is_a_failure() -> None:
    cluster = three_nodes()
    add_job(cluster, "a", pending=1)
    fake = FakeExtender(lambda verb, req: ["not", "an", "object"])
    ssn = run_with(cluster, fake, arguments(predicateVerb="filter"))
    assert binds(ssn) == {}


def test_unmanaged_tasks_are_not_sent() -> None:
    """With managedResources, a cpu-only task is not the extender's: no call, it binds."""
    cluster = three_nodes()
    add_job(cluster, "a", pending=1)
    fake = FakeExtender(lambda verb, req: {"status": "refused"})
    ssn = run_with(
        cluster, fake, arguments(predicateVerb="filter", managedResources=["nvidia.com/gpu"])
    )
    assert len(binds(ssn)) == 1
    assert fake.calls == []


def test_job_enqueueable_reject_keeps_the_job_pending() -> None:
    """jobEnqueueable answering -1 keeps a Pending job (with minResources: one without is
    let in unasked, as Volcano's enqueue does) out; 1 lets it in."""
    for status, bound in ((REJECT, 0), (PERMIT, 1)):
        cluster = three_nodes()
        add_job(cluster, "a", pending=1, phase="Pending", min_resources={"cpu": "1"})
        fake = FakeExtender(_answer({"status": status}))
        ssn = run_with(cluster, fake, arguments(jobEnqueueableVerb="enqueueable"))
        assert len(binds(ssn)) == bound
        assert fake.calls[0][1]["job"]["Name"] == "a"


def _victims_session(
    answer: Answer, **extra: Any
) -> tuple[ExtenderPlugin, Session, list[TaskInfo]]:
    cluster = cpu_cluster({"n0": "4"})
    victims = list(add_job(cluster, "low", running=3).tasks.values())
    add_job(cluster, "high", pending=1, priority=10)
    fake = FakeExtender(answer)
    plugin = ExtenderPlugin(
        Arguments("extender", arguments(preemptableVerb="preemptable", **extra)), fake.factory
    )
    return plugin, open_session(cluster, [plugin]), victims


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"status": PERMIT, "victims": "first"}, [0]),
        ({"status": ABSTAIN, "victims": []}, [0, 1, 2]),
        ({"status": REJECT, "victims": "first"}, []),
        (ExtenderError("down"), []),
    ],
)
def test_preemptable_answers(answer: Any, expected: list[int]) -> None:
    """Permit: the victims named (by UID); abstain: every candidate; reject or failure: none."""

    def reply(verb: str, req: dict[str, Any]) -> Any:
        if isinstance(answer, dict) and answer["victims"] == "first":
            return {**answer, "victims": [req["evictees"][0]]}
        return answer

    _, ssn, victims = _victims_session(reply)
    preemptor = next(t for j in ssn.jobs.values() if j.name == "high" for t in j.tasks.values())
    chosen = ssn.preemptable(preemptor, victims)
    assert [victims.index(t) for t in chosen] == expected


def test_overused_and_job_ready() -> None:
    """queueOverused and jobReady read their booleans; failing, they refuse (not ignorable)."""
    cluster = three_nodes()
    job = add_job(cluster, "a", pending=1)
    fake = FakeExtender(
        lambda verb, req: {"overused": True} if verb == "overused" else {"status": False}
    )
    plugin = ExtenderPlugin(
        Arguments("extender", arguments(queueOverusedVerb="overused", jobReadyVerb="ready")),
        fake.factory,
    )
    ssn = open_session(cluster, [plugin])
    assert ssn.overused(ssn.queues["default"]) is True
    assert ssn.job_ready(ssn.jobs[job.key]) is False
    assert [req.get("queue", {}).get("Name") for verb, req in fake.calls if verb == "overused"] == [
        "default"
    ]


def test_every_period_runs_a_session() -> None:
    """The extender's answers may change without a cluster event: the session asks for the
    next one at once, so quiet sessions are never skipped."""
    cluster = three_nodes()
    add_job(cluster, "a", pending=1)
    ssn = run_with(cluster, FakeExtender(_answer({"status": ""})), arguments(predicateVerb="f"))
    assert ssn.result.revisit_after == 0
