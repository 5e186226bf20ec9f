"""Kubernetes name rules with the API server's messages, and the names of a Job's pods and
their PVCs (caldera.api.names)."""

from __future__ import annotations

import pytest

from caldera.api.names import (
    dns1123_label,
    dns1123_subdomain,
    go_list,
    pod_index,
    pod_name,
    pod_name_prefix,
    pvc_name,
    qualified_name,
)


@pytest.mark.parametrize("value", ["a", "my-name", "123-abc", "a" * 63])
def test_valid_labels(value: str) -> None:
    """Lower-case alphanumerics and '-', at most 63."""
    assert dns1123_label(value) == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "a lowercase RFC 1123 label must consist of"),
        ("-a", "must start and end with an alphanumeric character"),
        (
            "A",
            "(e.g. 'my-name',  or '123-abc', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        ("a" * 64, "must be no more than 63 characters"),
    ],
)
def test_invalid_labels(value: str, message: str) -> None:
    """Each problem is worded as Kubernetes words it."""
    assert any(message in e for e in dns1123_label(value))


def test_subdomain() -> None:
    """Dots separate labels; at most 253 characters."""
    assert dns1123_subdomain("a.b-c.d") == []
    assert dns1123_subdomain("a" * 254)[0] == "must be no more than 253 characters"
    assert "lowercase RFC 1123 subdomain" in dns1123_subdomain("a..b")[0]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("MyName", None),
        ("example.com/my.name", None),
        ("x" * 64, "name part must be no more than 63 characters"),
        ("/a", "prefix part must be non-empty"),
        ("Bad_/a", "prefix part a lowercase RFC 1123 subdomain"),
        ("a/b/c", "a qualified name must consist of alphanumeric characters"),
        ("-a", "name part must consist of alphanumeric characters, '-', '_' or '.'"),
        ("", "name part must be non-empty"),
    ],
)
def test_qualified_name(value: str, message: str | None) -> None:
    """IsQualifiedName, prefix and name part."""
    errors = qualified_name(value)
    if message is None:
        assert errors == []
    else:
        assert any(e.startswith(message) for e in errors), errors


def test_go_list() -> None:
    """A []string as Go's %v prints it."""
    assert go_list(["a b", "c"]) == "[a b c]"
    assert go_list([]) == "[]"


def test_pod_and_pvc_names() -> None:
    """A Job's pod is `<job>-<task>-<index>`, a template's PVC `<template>-<pod>`."""
    assert pod_name("train", "worker", 3) == "train-worker-3"
    assert pod_name("train", "worker", 3).startswith(pod_name_prefix("train", "worker"))
    assert pvc_name("data", pod_name("train", "worker", 3)) == "data-train-worker-3"


@pytest.mark.parametrize(
    ("name", "replicas", "index"),
    [
        ("train-worker-0", 4, 0),
        ("train-worker-3", 4, 3),
        ("train-worker-4", 4, None),
        ("train-worker-03", 4, None),
        ("train-worker-", 4, None),
        ("train-worker-+1", 4, None),
        ("train-worker-\uff11", 4, None),
        ("train-ps-1", 4, None),
        ("other-worker-1", 4, None),
    ],
    ids=[
        "first",
        "last",
        "past-replicas",
        "leading-zero",
        "no-index",
        "sign",
        "non-ascii",
        "other-task",
        "other-job",
    ],
)
def test_pod_index_reads_back_pod_name(name: str, replicas: int, index: int | None) -> None:
    """`pod_index` is `pod_name`'s inverse for the task's slots, None for any other name."""
    prefix = pod_name_prefix("train", "worker")
    assert pod_index(name, prefix, replicas) == index
    if index is not None:
        assert pod_name("train", "worker", index) == name
