"""The class of miss from issue 19's rounds one hundred and eighty-two and one hundred and eighty-three (corpus
cases 6340-6376: NCCL and InfiniBand errors in multi-node training, GPU hardware faults as users meet them; reports
found by generic queries that show a printed line, taken as the search returned them). The kernel's messages are
verbatim from the public report named; times are made up."""

from __future__ import annotations

from gpuwatch.diagnosis.engine import diagnose_rules
from tests.gpuwatch.diagnosis.real_text import log_source


def test_a_gpu_the_driver_cannot_bring_up_is_the_nodes_hardware() -> None:
    # microsoft/pai#4344 (case 6369): nvidia-smi shows three of the node's four GPUs; the kernel says why.
    kern = (
        "[   12.611823] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  418.87.01  Thu Aug  8 15:35:46 CDT 2019\n"
        "[   38.773115] NVRM: RmInitAdapter failed! (0x26:0xffff:1127)\n"
        "[   38.773764] NVRM: rm_init_adapter failed for device bearing minor number 0\n"
    )
    d = diagnose_rules([log_source("kern.log", kern, node="pai-worker-07")])
    assert (d.reason, d.rule_id, d.node) == ("gpu_hardware", "gpu-device-handle-lost", "pai-worker-07")
