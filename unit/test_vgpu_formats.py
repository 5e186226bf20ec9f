"""The wire formats of GPU sharing (caldera.api.vgpu): HAMi's register annotation, a pod's vGPU
request from its limits, and the bind annotations, in Volcano's formats."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caldera.api.core import Container, Pod, PodSpec, ResourceRequirements
from caldera.api.meta import ObjectMeta
from caldera.api.vgpu import (
    ASSIGNED_NODE,
    BIND_PHASE,
    BIND_TIME,
    HAMI_CORE,
    IDS,
    MIG,
    NO_PERCENTAGE,
    NODE_LOCK,
    TO_ALLOCATE,
    Card,
    CardFilter,
    ContainerDevice,
    ContainerRequest,
    FormatError,
    asks_vgpu,
    bind_annotations,
    cards_in_use,
    container_requests,
    decode_pod_devices,
    encode_pod_devices,
    encode_register,
    group_key,
    node_lock_patch,
    parse_register,
)

# What HAMi's volcano-vgpu-device-plugin writes for two cards.
REGISTER_TEXT = (
    "GPU-0a1b,10,32768,NVIDIA-Tesla V100-PCIE-32GB,true,hami-core:"
    "GPU-2c3d,10,32768,NVIDIA-Tesla V100-PCIE-32GB,true,hami-core:"
)


def pod(
    *containers: dict[str, str], requests: bool = False, annotations: dict[str, str] | None = None
) -> Pod:
    return Pod(
        metadata=ObjectMeta(name="p", namespace="ns", annotations=annotations or {}),
        spec=PodSpec(
            containers=tuple(
                Container(
                    name=f"c{i}",
                    resources=ResourceRequirements(
                        requests=dict(c) if requests else {}, limits={} if requests else dict(c)
                    ),
                )
                for i, c in enumerate(containers)
            )
        ),
    )


def test_register_reads_each_card() -> None:
    """Each ``uuid,split,memory,type,health,mode:`` entry is a card, indexed by position."""
    read = parse_register(REGISTER_TEXT)
    assert read.mode == HAMI_CORE
    assert [c.uuid for c in read.cards] == ["GPU-0a1b", "GPU-2c3d"]
    assert read.cards[1] == Card(
        1, "GPU-2c3d", 10, 32768, "NVIDIA-Tesla V100-PCIE-32GB", True, HAMI_CORE
    )


def test_register_mode_and_health() -> None:
    """The node's mode is its last card's; an unknown mode reads as hami-core; health is Go's
    ParseBool."""
    read = parse_register("a,4,100,NVIDIA-A100,false,mig:b,4,100,NVIDIA-A100,True,other:")
    assert read.mode == HAMI_CORE
    assert [c.healthy for c in read.cards] == [False, True]
    assert parse_register("a,4,100,NVIDIA-A100,1,mig:").mode == MIG


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no card entry"),
        ("GPU-a,10,100,NVIDIA,true", "no card entry"),
        ("GPU-a,10,100,NVIDIA,true:", "fewer than 6 fields"),
        ("GPU-a,ten,100,NVIDIA,true,hami-core:", "split count"),
        ("GPU-a,10,-5,NVIDIA,true,hami-core:", "memory"),
        ("GPU-a,99999,100,NVIDIA,true,hami-core:", "out of range"),
        ("a,1,1,NVIDIA,true,hami-core:" * 65, "more than 64 cards"),
        ("x" * 20_000 + ":", "longer than"),
    ],
)
def test_register_errors_name_the_part(text: str, why: str) -> None:
    """A register annotation that does not read says which part, and names the annotation."""
    with pytest.raises(FormatError, match=why) as error:
        parse_register(text)
    assert "volcano.sh/node-vgpu-register" in str(error.value)


cards = st.lists(
    st.builds(
        Card,
        index=st.just(0),
        uuid=st.from_regex(r"GPU-[0-9a-f]{1,12}", fullmatch=True),
        split=st.integers(0, 1000),
        memory=st.integers(0, 1 << 20),
        type=st.from_regex(r"NVIDIA-[A-Za-z0-9 -]{0,12}", fullmatch=True),
        healthy=st.booleans(),
        mode=st.sampled_from([HAMI_CORE, MIG]),
    ),
    min_size=1,
    max_size=16,
)


@settings(max_examples=40)
@given(cards)
def test_register_round_trip(written: list[Card]) -> None:
    """What the device plugin writes reads back card for card."""
    read = parse_register(encode_register(written))
    assert [(c.uuid, c.split, c.memory, c.type, c.healthy, c.mode) for c in read.cards] == [
        (c.uuid, c.split, c.memory, c.type, c.healthy, c.mode) for c in written
    ]
    assert [c.index for c in read.cards] == list(range(len(written)))


def test_requests_as_volcano_reads_them() -> None:
    """Cards from the limit (1 with only memory), memory and cores; no memory asked means the
    whole card's memory (100 percent)."""
    assert container_requests(
        pod({"volcano.sh/vgpu-number": "2", "volcano.sh/vgpu-memory": "3000"})
    ) == (ContainerRequest(2, 3000, NO_PERCENTAGE, 0),)
    assert container_requests(pod({"volcano.sh/vgpu-memory": "1024", "cpu": "1"})) == (
        ContainerRequest(1, 1024, NO_PERCENTAGE, 0),
    )
    assert container_requests(
        pod({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": "100"})
    ) == (ContainerRequest(1, 0, 100, 100),)
    assert container_requests(
        pod({"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory-percentage": "25"})
    ) == (ContainerRequest(1, 0, 25, 0),)
    assert (
        container_requests(
            pod({"cpu": "1"}),
        )
        == ()
    )


def test_requests_only_in_requests_do_not_ask() -> None:
    """Volcano looks for the card count in the limits: requests alone ask nothing."""
    only_requests = pod({"volcano.sh/vgpu-number": "1"}, requests=True)
    assert container_requests(only_requests) == ()
    assert not asks_vgpu(only_requests)


def test_requests_per_container_and_hostile_figures() -> None:
    """Each asking container is one request; negative figures read as nothing asked."""
    two = pod(
        {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "-4000"},
        {"cpu": "1"},
        {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-cores": "-50"},
    )
    assert container_requests(two) == (
        ContainerRequest(1, 0, 100, 0),
        ContainerRequest(1, 0, 100, 0),
    )


def test_pod_devices_round_trip_in_volcano_format() -> None:
    """``uuid,type,memory,cores:`` per card, containers joined by ``;``."""
    devices = (
        (
            ContainerDevice("GPU-a", "NVIDIA", 3000, 30),
            ContainerDevice("GPU-b", "NVIDIA", 3000, 30),
        ),
        (ContainerDevice("GPU-c", "NVIDIA", 1000, 0),),
    )
    text = encode_pod_devices(devices)
    assert text == "GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,3000,30:;GPU-c,NVIDIA,1000,0:"
    assert decode_pod_devices(text) == devices
    assert decode_pod_devices("GPU-a,NVIDIA,x,1:GPU-b,NVIDIA,5,5:") == (
        (ContainerDevice("GPU-b", "NVIDIA", 5, 5),),
    )


def test_bind_annotations() -> None:
    """The bind writes the cards twice (ids and to-allocate), the node, the times and the
    allocating phase."""
    written = bind_annotations("n1", ((ContainerDevice("GPU-a", "NVIDIA", 10, 0),),), 1700000000)
    assert written[IDS] == written[TO_ALLOCATE] == "GPU-a,NVIDIA,10,0:"
    assert written[ASSIGNED_NODE] == "n1"
    assert written[BIND_PHASE] == "allocating"
    assert written[BIND_TIME] == "1700000000"


def test_card_filter() -> None:
    """Type lists are case-blind substrings (use wins over nouse); UUID lists are exact, the
    denylist wins."""
    use = CardFilter.of({"nvidia.com/use-gputype": "a100,h100"})
    assert use.type_allows("NVIDIA-A100-SXM4")
    assert not use.type_allows("NVIDIA-V100")
    nouse = CardFilter.of({"nvidia.com/nouse-gputype": "V100"})
    assert nouse.type_allows("NVIDIA-A100")
    assert not nouse.type_allows("NVIDIA-Tesla V100")
    assert not CardFilter().type_allows("AMD-MI300")
    uuids = CardFilter.of(
        {"volcano.sh/vgpu-use-gpuuuid": "GPU-a, GPU-b", "volcano.sh/vgpu-nouse-gpuuuid": "GPU-b"}
    )
    assert uuids.uuid_allows("GPU-a")
    assert not uuids.uuid_allows("GPU-b")
    assert not uuids.uuid_allows("GPU-c")


def test_group_key() -> None:
    assert group_key(pod(annotations={"scheduling.k8s.io/group-name": "pg"})) == "ns/pg"
    assert group_key(pod()) == ""


def test_node_lock_patch() -> None:
    """The lock is taken when absent, stale (older than 5 minutes) or unreadable, with the
    node's resourceVersion as a precondition; a fresh lock held by another refuses."""
    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    taken = node_lock_patch({}, "42", now)
    assert taken == {
        "metadata": {"resourceVersion": "42", "annotations": {NODE_LOCK: "2026-01-01T12:00:00Z"}}
    }
    assert node_lock_patch({NODE_LOCK: "2026-01-01T11:58:00Z"}, "42", now) is None
    assert node_lock_patch({NODE_LOCK: "2026-01-01T11:50:00Z"}, "42", now) is not None
    assert node_lock_patch({NODE_LOCK: "yesterday"}, "42", now) is not None


def test_cards_in_use_add_up_the_pods_annotations() -> None:
    """Each card's pods, memory and cores are what the bound pods' ids annotations give it;
    a card no pod names is idle, a register that does not read gives no cards."""
    used = cards_in_use(
        REGISTER_TEXT,
        ["GPU-0a1b,NVIDIA,3000,30:", "GPU-0a1b,NVIDIA,1000,0:;GPU-9999,NVIDIA,5,5:"],
    )
    assert [(u.card.uuid, u.pods, u.memory, u.cores) for u in used] == [
        ("GPU-0a1b", 2, 4000, 30),
        ("GPU-2c3d", 0, 0, 0),
    ]
    assert cards_in_use("not a register", []) == ()
