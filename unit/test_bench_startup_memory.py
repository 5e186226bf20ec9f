"""bench/startup_memory.py's pure parts: the node Lease for a size, kwok's configuration (node
stages only, heartbeats spaced at size) and the pods it writes to etcd."""

from __future__ import annotations

from typing import Any

import yaml

from bench.startup_memory import (
    KWOK_PARALLELISM,
    node_lease_seconds,
    node_stages,
    running_pod,
    stored_pod,
)
from e2e.cluster.control_plane import STAGES


def heartbeat_delay(docs: list[dict[str, Any]]) -> dict[str, int]:
    [delay] = [d["spec"]["delay"] for d in docs if d["kind"] == "Stage" and "delay" in d["spec"]]
    return {key: int(value) for key, value in delay.items()}


def test_the_lease_keeps_renewals_near_50_a_second() -> None:
    assert node_lease_seconds(100) == 40
    assert node_lease_seconds(15_000) == 1200
    assert 4 * 15_000 / node_lease_seconds(15_000) <= 50


def test_kwok_gets_node_stages_only_and_handles_more_nodes_at_once() -> None:
    docs = list(yaml.safe_load_all(node_stages(STAGES.read_text(), 100)))
    stages = [d for d in docs if d["kind"] == "Stage"]
    assert stages
    assert {d["spec"]["resourceRef"]["kind"] for d in stages} == {"Node"}
    [config] = [d for d in docs if d["kind"] == "KwokConfiguration"]
    assert config["options"]["nodePlayStageParallelism"] == KWOK_PARALLELISM
    # a small cluster keeps the stages file's heartbeat
    assert heartbeat_delay(docs)["durationMilliseconds"] == 300_000


def test_heartbeats_are_spaced_at_size() -> None:
    docs = list(yaml.safe_load_all(node_stages(STAGES.read_text(), 15_000)))
    delay = heartbeat_delay(docs)
    mean_seconds = (delay["durationMilliseconds"] + delay["jitterDurationMilliseconds"]) / 2000
    assert 15_000 / mean_seconds == 10


def test_a_stored_pod_is_the_created_pod_defaulted_and_running() -> None:
    created, stored = running_pod(7, "n-7"), stored_pod(7, "n-7", "2026-11-29T00:00:00Z")
    assert stored["metadata"]["name"] == created["metadata"]["name"] == "g-0-7"
    assert stored["metadata"]["uid"] == stored_pod(7, "n-7", "x")["metadata"]["uid"]
    assert stored["spec"]["nodeName"] == "n-7"
    assert (
        stored["spec"]["containers"][0]["resources"]
        == created["spec"]["containers"][0]["resources"]
    )
    assert stored["status"]["phase"] == "Running"
    assert stored["status"]["podIP"] != stored_pod(8, "n-8", "x")["status"]["podIP"]
