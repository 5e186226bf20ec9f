"""What /proc says about a process the benches started: its CPU seconds and its memory, and the
machine's load average, so that every figure can be quoted beside the load it was measured at.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

_TICKS: Final = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float:
    """User plus system CPU seconds of ``pid`` so far (0 when it is gone or None)."""
    if pid is None:
        return 0.0
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # Fields after the command name (which may hold spaces): state is the first, utime the 12th.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def memory_kib(pid: int | None, field: str = "VmHWM") -> int:
    """A ``/proc/<pid>/status`` memory field in KiB: ``VmHWM`` (peak resident set, the default)
    or ``VmRSS`` (resident now); 0 when the process is gone or None."""
    return memory_fields_kib(pid, field)[0]


def memory_fields_kib(pid: int | None, *fields: str) -> tuple[int, ...]:
    """Several ``/proc/<pid>/status`` memory fields in KiB, from one read: figures of one
    moment (two reads of a running process may see its resident set grow in between, so that
    the first read's peak falls below the second's resident set); 0 for each when the process
    is gone or None, or for a field the file lacks."""
    if pid is None:
        return (0,) * len(fields)
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return (0,) * len(fields)
    found: dict[str, int] = {}
    for line in status.splitlines():
        name, _, rest = line.partition(":")
        if name in fields:
            found[name] = int(rest.split()[0])
    return tuple(found.get(field, 0) for field in fields)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages, as ``uptime`` prints them."""
    one, five, fifteen = Path("/proc/loadavg").read_text().split()[:3]
    return f"{one}, {five}, {fifteen}"


def available_gib() -> float:
    """MemAvailable of the machine, in GiB."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 2**20
    return 0.0
