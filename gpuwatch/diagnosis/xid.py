"""NVIDIA Xid codes: which mean the GPU or its links failed (a restart elsewhere helps) and which
are what an application did to itself (see NVIDIA's Xid catalogue)."""

from __future__ import annotations

import re

#: Xid → reason, for the Xids that are evidence of a failure.
XID_REASONS: dict[int, str] = {
    48: "gpu_hardware",  # double-bit ECC error
    61: "gpu_hardware",  # internal micro-controller breakpoint/warning
    62: "gpu_hardware",  # internal micro-controller halt
    63: "gpu_hardware",  # ECC page retirement / row remapping recording event
    64: "gpu_hardware",  # ECC page retirement / row remapper failure
    74: "nvlink_error",  # NVLink error
    79: "gpu_hardware",  # GPU has fallen off the bus
    92: "gpu_hardware",  # high single-bit ECC error rate
    94: "gpu_hardware",  # contained ECC error
    95: "gpu_hardware",  # uncontained ECC error
    119: "gpu_hardware",  # GSP RPC timeout
    120: "gpu_hardware",  # GSP error
    140: "gpu_hardware",  # unrecovered ECC error
}
#: Xids an application causes (a bad kernel, a killed process): never blame the node for these.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 69})

#: The kernel driver's line, and the line the server writes for an Xid that NVML reported (xid_event_line).
XID_LINE = re.compile(
    r"(?:NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)\)|NVML Xid event \(GPU (?P<gpu>\d+)\)): (?P<xid>\d+)\b"
)


def xid_reason(xid: int) -> str | None:
    return XID_REASONS.get(xid)


def xid_event_line(gpu: int | None, xid: int, message: str = "") -> str:
    """An Xid event from NVML as a log line the rules read like the kernel's own NVRM line."""
    return f"NVML Xid event (GPU {gpu if gpu is not None else '?'}): {xid}{', ' + message if message else ''}"


def fatal_xid_in_line(text: str) -> int | None:
    """The Xid code of a kernel or NVML Xid line when it means a hardware or link failure, else None."""
    m = XID_LINE.search(text)
    if m is None:
        return None
    code = int(m.group("xid"))
    return code if code in XID_REASONS else None
