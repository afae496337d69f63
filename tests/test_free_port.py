"""The loopback ports tests hand to servers they start later lie outside the kernel's ephemeral range, where no
outgoing connection of a test running beside them can take one first."""

from __future__ import annotations

import socket

from tests.helpers import _ephemeral_range, free_port


def test_free_ports_are_below_the_ephemeral_range_and_bindable() -> None:
    low, _ = _ephemeral_range()
    ports = {free_port() for _ in range(20)}
    assert all(10_000 <= p < low for p in ports), ports
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # raises if it was not free
