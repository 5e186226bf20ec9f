"""e2e's port picker: free ports below the kernel's ephemeral range, so that no outgoing
connection can take one between the pick and the bind of the process it is for."""

from __future__ import annotations

import socket

from e2e.cluster.control_plane import _ephemeral_start, free_port


def test_free_ports_are_bindable_and_below_the_ephemeral_range() -> None:
    ports = [free_port() for _ in range(20)]
    start = min(_ephemeral_start(), 32768)
    assert all(20000 <= p < start for p in ports)
    assert len(set(ports)) > 1  # chosen at random, not one fixed port
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[0]))
