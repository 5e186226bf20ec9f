"""Reading a simulation's files: the cluster file, the trace, the manifests a trace names, and
the scheduler configuration; the simulator's input edge (``simulator.spec`` decodes).

Files are YAML (JSON is YAML too); a file named ``*.json`` is read as JSON, which is many times
faster for a trace of thousands of Jobs. A path inside a file is relative to that file. Every
problem is a ``SpecError`` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from scheduler.conf import DEFAULT_CONF, ConfError, SchedulerConf, parse_conf
from scheduler.registry import REGISTRY
from simulator.spec import Scenario, SpecError, parse_cluster, parse_trace


def read_document(path: Path) -> Any:
    """The one YAML or JSON document in ``path``."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise SpecError(f"{path}: not valid JSON: {exc}") from None
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML or JSON: {exc}") from None
    if len(documents) != 1:
        raise SpecError(f"{path}: holds {len(documents)} documents; one is expected")
    return documents[0]


def load_scenario(cluster_path: Path, trace_path: Path) -> Scenario:
    """The cluster and the trace, decoded and admitted."""
    cluster = parse_cluster(read_document(cluster_path), source=str(cluster_path))
    jobs = parse_trace(
        read_document(trace_path),
        source=str(trace_path),
        queues=cluster.queues,
        priority_classes=[pc.metadata.name for pc in cluster.priority_classes],
        read=lambda name: read_document(trace_path.parent / name),
    )
    return Scenario(cluster=cluster, jobs=jobs)


def conf_text(conf_path: Path | None, cluster_path: Path, named: str) -> tuple[str, str]:
    """(the configuration's text, where it came from): ``conf_path`` when given, else the
    cluster file's ``schedulerConf`` (``named``, relative to it), else Volcano's default."""
    if conf_path is None and named:
        conf_path = cluster_path.parent / named
    if conf_path is None:
        return DEFAULT_CONF, "Volcano's default configuration"
    try:
        return conf_path.read_text(), str(conf_path)
    except OSError as exc:
        raise SpecError(f"{conf_path}: cannot be read: {exc.strerror or exc}") from None


def load_conf(text: str, source: str) -> SchedulerConf:
    """A scheduler configuration in Volcano's format, as ``caldera scheduler`` parses it."""
    try:
        return parse_conf(text, actions=REGISTRY.actions, plugins=REGISTRY.plugins)
    except ConfError as exc:
        raise SpecError(f"{source}: {exc}") from None
