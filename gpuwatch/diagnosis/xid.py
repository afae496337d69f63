"""NVIDIA Xid codes: which mean the GPU or its links failed (a restart elsewhere helps) and which
are what an application did to itself, and the several ways an Xid is written down.

The table follows NVIDIA's Xid catalogue for Ampere and newer GPUs
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), its GPU Operational Events
release notes (NVLink SAW/RLW/TLW/TREX/NVLPW/NETIR errors, the Blackwell NVLink Xids 144-150) and
NVIDIA Health Validation's Xid checks (https://docs.nvidia.com/health-validation/reference/checks/xid.md,
where Xid 46 and 48 are CRITICAL with the action "drain").
"""

from __future__ import annotations

import re

#: Xid → reason, for the Xids that are evidence of a failure.
XID_REASONS: dict[int, str] = {
    46: "gpu_hardware",  # GPU stopped processing (Health Validation: CRITICAL, drain → reset GPU)
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
    144: "nvlink_error",  # NVLink SAW error
    145: "nvlink_error",  # NVLink RLW error
    146: "nvlink_error",  # NVLink TLW error
    147: "nvlink_error",  # NVLink TREX error
    148: "nvlink_error",  # NVLink NVLPW error
    149: "nvlink_error",  # NVLink NETIR error
    150: "nvlink_error",  # NVLink MSE error
    154: "gpu_hardware",  # GPU recovery action changed: the driver asks for a GPU reset or a node reboot
}
#: Xids an application causes (a bad kernel, a killed process): never blame the node for these.
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 69})

# The emitters, one alternative each (the code is the first group that matched):
#   the kernel driver:      NVRM: Xid (PCI:0000:06:00): 79, pid=..., GPU has fallen off the bus.
#   the server (NVML):      NVML Xid event (GPU 3): 79                     (xid_event_line below)
#   the k8s device plugin:  XidCriticalError: Xid=48 on Device=GPU-..., the device will go unhealthy.
#   NVIDIA's docs, DCGM, nvidia-smi and monitors: "XID 48 An uncorrectable ...", "Xid: 79", "xid=94",
#                           "Detected Xid 119 on GPU 2"; NHC's check_xid_errors: "Found XID errors: 63"
XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F:.]+)\): (?P<xid>\d+)\b"
    r"|NVML Xid event \(GPU (?P<gpu>\d+)\): (?P<nvml>\d+)\b"
    r"|\b(?i:xid)(?:\s+(?i:errors?))?(?:\s*[=:]\s*|\s+)(?P<other>\d{1,3})\b(?!\s*(?:ms|s|sec|seconds|%))"
)
#: An application Xid that names the Xid behind it ("45, ... caused by previous Xid 145").
_CAUSED_BY = re.compile(r"(?i)caused by previous Xid (\d+)")


def xid_code(text: str) -> int | None:
    """The Xid code a line reports, from any of the emitters; an Xid that only cleans up after an
    earlier one counts as the earlier one."""
    m = XID_LINE.search(text)
    if m is None:
        return None
    code = int(m.group("xid") or m.group("nvml") or m.group("other"))
    if code in APPLICATION_XIDS and (cause := _CAUSED_BY.search(text)) is not None:
        return int(cause.group(1))
    return code


def xid_reason(xid: int) -> str | None:
    return XID_REASONS.get(xid)


def xid_event_line(gpu: int | None, xid: int, message: str = "") -> str:
    """An Xid event from NVML as a log line the rules read like the kernel's own NVRM line."""
    return f"NVML Xid event (GPU {gpu if gpu is not None else '?'}): {xid}{', ' + message if message else ''}"


def fatal_xid_in_line(text: str) -> int | None:
    """The Xid code of a kernel or NVML Xid line when it means a hardware or link failure, else None."""
    code = xid_code(text)
    return code if code is not None and code in XID_REASONS else None
