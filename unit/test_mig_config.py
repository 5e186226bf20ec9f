"""The device ConfigMap's MIG geometries and the MIG instance naming (caldera.api.mig): what
Volcano reads, bounded, and errors that name the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caldera.api.mig import (
    CONFIG_KEY,
    MAX_ENTRIES,
    ConfigError,
    Geometry,
    Instance,
    decode_mig_id,
    encode_mig_id,
    parse_device_config,
)
from caldera.api.vgpu import MIG, Card, cards_in_use, encode_register

VOLCANO_EXAMPLE = """
nvidia:
  resourceCountName: volcano.sh/vgpu-number
  knownMigGeometries:
  - models: [ "A30" ]
    allowedGeometries:
      - group: group1
        geometries:
        - name: 1g.6gb
          memory: 6144
          count: 4
  - models: [ "A100-SXM4-40GB", "A100-PCIE-40GB" ]
    allowedGeometries:
      - group: group2
        geometries:
        - name: 2g.10gb
          memory: 10240
          count: 3
        - name: 1g.5gb
          memory: 5120
          count: 1
"""


def test_volcanos_example_reads() -> None:
    """The design document's ConfigMap: geometries per model family, by substring of type."""
    config = parse_device_config({CONFIG_KEY: VOLCANO_EXAMPLE})
    assert config.memory_factor == 1
    assert config.geometries_for("NVIDIA-A30") == (
        Geometry("group1", (Instance("1g.6gb", 6144, 4),)),
    )
    group2 = config.geometries_for("NVIDIA-A100-PCIE-40GB")[0]
    assert group2.size == 4
    assert group2.kind_at(3) == 1
    assert group2.kind_at(4) == -1
    assert group2.first_position(1) == 3
    assert config.geometries_for("NVIDIA-H100") == ()


def test_an_empty_or_nvidia_less_config_knows_no_geometry() -> None:
    """Volcano's other devices' settings alone: no geometry, no error."""
    assert parse_device_config({CONFIG_KEY: ""}).known == ()
    assert parse_device_config({CONFIG_KEY: "vnpus: []"}).known == ()
    assert parse_device_config({CONFIG_KEY: "nvidia:\n  gpuMemoryFactor: 4"}).memory_factor == 4


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("nvidia: [1]", "nvidia: must be a mapping"),
        ("nvidia: {knownMigGeometries: 3}", "nvidia.knownMigGeometries: must be a list"),
        (
            "nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: "
            "[{group: g-1, geometries: [{name: a, memory: 1, count: 1}]}]}]}",
            "knownMigGeometries[0].allowedGeometries[0].group",
        ),
        (
            "nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: "
            "[{group: g, geometries: [{name: a, memory: 1, count: 99}]}]}]}",
            "geometries[0].count: must be between 1 and 16",
        ),
        (
            "nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: "
            "[{group: g, geometries: [{name: a, memory: x, count: 1}]}]}]}",
            "geometries[0].memory: must be a whole number",
        ),
        (
            "nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: "
            "[{group: g, geometries: []}]}]}",
            "names no instance",
        ),
        (
            "nvidia: {knownMigGeometries: [{models: [A30], allowedGeometries: "
            "[{group: g, geometries: [{name: a, memory: 1, count: 1}]},"
            " {group: g, geometries: [{name: a, memory: 1, count: 1}]}]}]}",
            "a group name is given twice",
        ),
        ("nvidia: {gpuMemoryFactor: -1}", "nvidia.gpuMemoryFactor"),
        ("nvidia: {knownMigGeometries: [{models: [1]}]}", "models[0]"),
        ("{{{", "not YAML"),
    ],
)
def test_a_bad_config_is_an_error_naming_the_field(text: str, names: str) -> None:
    """Each malformed part is refused with a message naming where it is."""
    with pytest.raises(ConfigError, match=names.replace("[", r"\[").replace("]", r"\]")):
        parse_device_config({CONFIG_KEY: text})


def test_the_config_is_bounded() -> None:
    """A missing key, an oversized text or list is refused before it is walked."""
    with pytest.raises(ConfigError, match="missing"):
        parse_device_config({})
    with pytest.raises(ConfigError, match="longer than"):
        parse_device_config({CONFIG_KEY: "#" * 300_000})
    entries = ",".join(["{models: [A], allowedGeometries: []}"] * (MAX_ENTRIES + 1))
    with pytest.raises(ConfigError, match="more than 64"):
        parse_device_config({CONFIG_KEY: f"nvidia: {{knownMigGeometries: [{entries}]}}"})


def test_mig_ids_read_as_volcano_writes_them() -> None:
    """uuid[group-position]; a plain UUID or a malformed name is not an instance."""
    assert encode_mig_id("GPU-0fc3", "group2", 3) == "GPU-0fc3[group2-3]"
    assert decode_mig_id("GPU-0fc3[group2-3]") == ("GPU-0fc3", "group2", 3)
    for text in ("GPU-0fc3", "GPU-0fc3[group2]", "GPU-0fc3[a-b-1]", "GPU[g-1]x", "GPU[g-99999]"):
        assert decode_mig_id(text) is None


@given(
    uuid=st.from_regex(r"GPU-[0-9a-f-]{0,40}", fullmatch=True),
    group=st.from_regex(r"[A-Za-z0-9_.]{1,20}", fullmatch=True),
    position=st.integers(0, 15),
)
def test_mig_ids_round_trip(uuid: str, group: str, position: int) -> None:
    """Every name the config allows reads back to what was written."""
    assert decode_mig_id(encode_mig_id(uuid, group, position)) == (uuid, group, position)


def test_views_count_a_mig_instance_on_its_card() -> None:
    """caldera node list and the metrics add a MIG instance's figures to its card."""
    register = encode_register([Card(0, "GPU-a", 7, 24576, "NVIDIA-A30", True, MIG)])
    (card,) = cards_in_use(
        register, ["GPU-a[group1-0],NVIDIA,5000,0:", "GPU-a[group1-1],NVIDIA,3000,0:"]
    )
    assert (card.pods, card.memory) == (2, 8000)
