"""Kubernetes name rules with the API server's own messages (k8s.io/apimachinery validation),
and the names Caldera gives a Job's pods and their PVCs.

Each rule returns the list of problems, empty when the value is valid, worded exactly as
Kubernetes words them, so a user sees the message `kubectl` users know. `go_list` renders such a
list as Go's `%v` does (`[a b]`), which is how Volcano embeds them in its messages.

A Job's pod is ``<job>-<task>-<index>`` (`pod_name`; `pod_index` reads the index back) and the
PVC of a volumeClaimTemplate ``<template>-<pod>`` (`pvc_name`): the job controller, the job
plugins, the webhook's length checks and the CLI all name them here, so the names agree.

An import-linter contract keeps this module free of I/O (docs/architecture.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final

__all__ = [
    "DNS1123_LABEL_MAX",
    "DNS1123_SUBDOMAIN_MAX",
    "dns1123_label",
    "dns1123_subdomain",
    "go_list",
    "pod_index",
    "pod_name",
    "pod_name_prefix",
    "pvc_name",
    "qualified_name",
]

DNS1123_LABEL_MAX: Final = 63
DNS1123_SUBDOMAIN_MAX: Final = 253
_QUALIFIED_NAME_MAX: Final = 63

_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT: Final = _LABEL_FMT + r"(\." + _LABEL_FMT + ")*"
_QUALIFIED_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_RE: Final = re.compile(_LABEL_FMT)
_SUBDOMAIN_RE: Final = re.compile(_SUBDOMAIN_FMT)
_QUALIFIED_RE: Final = re.compile(_QUALIFIED_FMT)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    shown = ",  or ".join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {shown}, regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


_LABEL_MSG: Final = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character",
    _LABEL_FMT,
    "my-name",
    "123-abc",
)
_SUBDOMAIN_MSG: Final = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character",
    _SUBDOMAIN_FMT,
    "example.com",
)
_QUALIFIED_CHARS: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)


def dns1123_label(value: str) -> list[str]:
    """IsDNS1123Label: at most 63 lower-case alphanumerics or '-', alphanumeric at both ends."""
    errors = []
    if len(value) > DNS1123_LABEL_MAX:
        errors.append(_max_len(DNS1123_LABEL_MAX))
    if not _LABEL_RE.fullmatch(value):
        errors.append(_LABEL_MSG)
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    """IsDNS1123Subdomain: at most 253 characters of dot-separated DNS labels."""
    errors = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errors.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _SUBDOMAIN_RE.fullmatch(value):
        errors.append(_SUBDOMAIN_MSG)
    return errors


def qualified_name(value: str) -> list[str]:
    """IsQualifiedName: an optional DNS subdomain prefix and '/', then a name of at most 63."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errors: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors = ["prefix part must be non-empty"]
        else:
            errors = ["prefix part " + e for e in dns1123_subdomain(prefix)]
    else:
        return [
            _regex_error(
                "a qualified name " + _QUALIFIED_CHARS,
                _QUALIFIED_FMT,
                "MyName",
                "my.name",
                "123-abc",
            )
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _QUALIFIED_NAME_MAX:
        errors.append("name part " + _max_len(_QUALIFIED_NAME_MAX))
    if name and not _QUALIFIED_RE.fullmatch(name):
        errors.append(
            _regex_error(
                "name part " + _QUALIFIED_CHARS, _QUALIFIED_FMT, "MyName", "my.name", "123-abc"
            )
        )
    return errors


def go_list(items: Sequence[str]) -> str:
    """A list of strings as Go's `%v` prints a []string: `[a b c]`."""
    return "[" + " ".join(items) + "]"


def go_quote(text: str) -> str:
    """A string as Go's ``%q`` prints it: double quotes, backslash escapes (Volcano's messages
    quote names and schedules so)."""
    return json.dumps(text, ensure_ascii=False)


def pod_name_prefix(job: str, task: str) -> str:
    """What the name of every pod of a task starts with: ``<job>-<task>-``."""
    return f"{job}-{task}-"


def pod_name(job: str, task: str, index: int) -> str:
    """The name of pod `index` of a task: ``<job>-<task>-<index>``, `pod_name_prefix` and the
    index (written out, not called: a sync of a big task names up to 500 pods)."""
    return f"{job}-{task}-{index}"


def pod_index(name: str, prefix: str, replicas: int) -> int | None:
    """The index i of pod `name` if it is `pod_name`'s ``<prefix><i>`` (`prefix` from
    `pod_name_prefix`; i decimal, no leading zero) with i < replicas, else None. O(1): no list
    of the task's names."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :]
    if not (digits.isascii() and digits.isdigit()) or (digits[0] == "0" and len(digits) > 1):
        return None
    index = int(digits)
    return index if index < replicas else None


def pvc_name(template: str, pod: str) -> str:
    """Caldera extension: the PVC of volumeClaimTemplate `template` for pod `pod`,
    ``<template>-<pod>``."""
    return f"{template}-{pod}"
