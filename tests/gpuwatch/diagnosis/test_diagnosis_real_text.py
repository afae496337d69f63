"""The classes of misses found by running real failure reports through the rules (issue 19), each
pinned by real text: the error messages are verbatim from the public reports named in each test (hosts,
paths and pids made up). The corpus (tests/data/failures, cases with a `format`) holds the full cases.
Log lines are kept whole, as programs print them: a wrapped line is not the line the rules meet."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import LogSource
from gpuwatch.diagnosis.normalize import normalize, syslog_host
from gpuwatch.diagnosis.xid import fatal_xid_in_line, xid_code


def _src(name: str, text: str, **kw: object) -> LogSource:
    return LogSource(file=name, lines=text.strip("\n").splitlines(), **kw)  # type: ignore[arg-type]


def _reason(text: str, name: str = "train.log") -> str:
    return diagnose_rules([_src(name, text)]).reason


# ---------------------------------------------------------------- one phrasing per signature


def test_a_device_plugin_xid_blames_the_gpu_and_the_node_named_by_the_file() -> None:
    """NVIDIA/k8s-device-plugin#189: the Xid only in the plugin's XidCriticalError line; the pod log
    shows a bare CUDA error that would otherwise be cuda_error (restart without excluding the node)."""
    plugin = _src(
        "nvidia-device-plugin-gke-a100-pool-3b9c.log",
        """
2024/03/04 02:41:55 XidCriticalError: Xid=48 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy.
2024/03/04 02:41:55 'nvidia.com/gpu' device marked unhealthy: GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8
""",
    )
    pod = _src("trainer-0.log", "RuntimeError: CUDA error: unspecified launch failure")
    d = diagnose_rules([pod, plugin])
    assert (d.reason, d.action, d.node) == ("gpu_hardware", "restart_exclude_node", "gke-a100-pool-3b9c")


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ("NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.", 79),  # open-gpu-kernel-modules#1151
        ("XidCriticalError: Xid=48 on Device=GPU-7540a9b3, the device will go unhealthy.", 48),  # k8s-device-plugin
        ("XID 48 An uncorrectable double bit error (DBE) has been detected on GPU (0000:3b:00.0)", 48),  # NVIDIA docs
        ("NVML Xid event (GPU 3): 94", 94),
        # open-gpu-kernel-modules#1150: the cleanup Xid 45 names the NVLink Xid that caused it
        ("NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145", 145),
        # leptonai/gpud#1160: a Blackwell NVLink Xid, missing from a table written before it
        ("NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000)", 149),
    ],
)
def test_xids_are_read_from_every_emitter(line: str, code: int) -> None:
    assert xid_code(line) == code
    assert fatal_xid_in_line(line) == code


def test_an_application_xid_alone_is_not_hardware_and_a_number_is_not_an_xid() -> None:
    assert fatal_xid_in_line("NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM") is None
    assert xid_code("timeout after xid 5 ms") is None


def test_blackwell_nvlink_xids_are_nvlink_errors_on_the_node_of_the_kernel_log() -> None:
    kern = _src(
        "kern-b200-n12.log",
        """
[88123.441201] NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
[88123.552114] NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149
""",
    )
    d = diagnose_rules([kern])
    assert (d.reason, d.node) == ("nvlink_error", "b200-n12")


def test_syslog_and_dmesg_t_forms_name_their_node() -> None:
    """open-gpu-kernel-modules#1151 in syslog form: the host field is the node to drain."""
    syslog = _src(
        "syslog",
        """
May 23 14:02:11 dgx-a41 kernel: NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.
May 23 14:02:11 dgx-a41 kernel: NVRM: kgspRcAndNotifyAllChannels_IMPL: RC all channels for critical error 79.
""",
    )
    assert syslog_host(syslog.lines[0]) == "dgx-a41"
    d = diagnose_rules([syslog, _src("train.log", "[rank1]: ncclUnhandledCudaError: Call to CUDA function failed.")])
    assert (d.reason, d.node) == ("gpu_hardware", "dgx-a41")
    dmesg_t = (
        "[Mon Mar 30 09:12:41 2026] nvidia-nvswitch3: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 33 LTSSM Fault Up"
    )
    assert diagnose_rules([_src("dmesg-miller.txt", dmesg_t)]).node == "miller"  # cihlab/fics-cluster-guide#53


def test_a_lost_gpu_without_an_xid_is_hardware_and_corrected_pcie_errors_are_noise() -> None:
    """rwth-i6/returnn#1486: corrected AER errors, then nvidia-smi cannot reach the GPU."""
    aer = """
[  +0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0
[  +0.000005] pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, (Transmitter ID)
"""
    assert _reason(aer, "dmesg.txt") == "unknown"
    lost = aer + "Unable to determine the device handle for GPU0000:03:00.0: Unknown Error\n"
    assert _reason(lost, "dmesg.txt") == "gpu_hardware"


@pytest.mark.parametrize(
    "line",
    [
        # hiyouga/LlamaFactory#6953
        "[rank144]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 144] Heartbeat monitor timed out! Process will be "
        "terminated after dumping debug info. workMetaList_.size()=1",
        # salesforce/MUST#7
        "[E ProcessGroupNCCL.cpp:341] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
        "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
    ],
)
def test_nccl_hangs_worded_other_than_the_watchdog_sentence(line: str) -> None:
    assert _reason(line) == "nccl_timeout"


@pytest.mark.parametrize(
    "line",
    [
        # NVIDIA/nccl#1814
        "hostname-test:980:1322 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
        "10.87.88.182<55921> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:29.87.4.221",
        # NVIDIA/nccl#1664
        "worker-node1:2304:2351 [5] NCCL WARN NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 "
        "opcode=32698 len=32696 vendor err 129 (Send)",
        # NVIDIA/nccl#230
        "container-57:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error",
    ],
)
def test_infiniband_errors_by_status_number_and_async_event(line: str) -> None:
    assert _reason(line) == "network_error"


def test_the_ib_error_inside_a_remote_error_line_is_the_cause() -> None:
    """tatsu-lab/stanford_alpaca#207: one line with the watchdog's words, ncclRemoteError and, last, the
    IB completion error that explains them."""
    line = (
        "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. terminate called after throwing "
        "an instance of 'std::runtime_error' what(): NCCL error: remote process exited or there was a network error, "
        "NCCL version 2.14.3 ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely. Last error: NET/IB : Got completion from peer 11.214.147.122<39138> with error 12, "
        "opcode 0, len 0, vendor err 129"
    )
    assert _reason(line) == "network_error"


@pytest.mark.parametrize(
    "text",
    [
        # hpcaitech/ColossalAI#3514
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 812917) of "
        "binary: /data/env/bin/python",
        # resistzzz/Prompt4NR#3
        "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
        # kubernetes/kubernetes#19825
        "    State:          Terminated\n      Reason:       Error\n      Exit Code:    137",
    ],
)
def test_kills_written_in_the_text_are_host_oom(text: str) -> None:
    assert _reason(text) == "host_oom"


def test_a_kill_written_in_text_loses_to_the_preemption_that_caused_it() -> None:
    text = """
slurmstepd: error: *** JOB 494583 ON gpu-n17 CANCELLED AT 2024-04-20T09:09:37 DUE TO PREEMPTION ***
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 8180) of binary: /usr/bin/python3
"""
    assert _reason(text) == "preempted"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("slurmstepd: error: execve(): start-agent.sh: Permission denied", "permission_error"),  # wandb_on_slurm#5
        ("-bash: line 1: /var/spool/torque/mom_priv/jobs/0.mybox.SC: Permission denied", "permission_error"),
        ("scripts/train-pt.sh: line 30: torchrun: command not found", "file_not_found"),  # Chinese-Mixtral#23
        ("/bin/sh: 1: torchrun: not found", "file_not_found"),  # LlamaFactory#5216
        (
            "slurmstepd: error: execve(): /tmp/slurmd/job2997814/slurm_script: No such file or directory",
            "file_not_found",
        ),
    ],
)
def test_shell_and_launcher_errors_without_an_errno(line: str, reason: str) -> None:
    assert _reason(line) == reason


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # facebookresearch/SlowFast#443: SIGSEGV is a decode crash, not the OOM killer
        ("RuntimeError: DataLoader worker (pid 26471) is killed by signal: Segmentation fault.", "dataloader_error"),
        ("ERROR: Unexpected segmentation fault encountered in worker.", "dataloader_error"),  # STVIR/pysot#140
        ("RuntimeError: DataLoader worker (pid 5678) is killed by signal: Killed.", "host_oom"),
    ],
)
def test_dataloader_workers_killed_by_other_signals(line: str, reason: str) -> None:
    assert _reason(line) == reason


@pytest.mark.parametrize(
    "line",
    [
        # mxfold/mxfold2#20
        "RuntimeError: [enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you "
        "tried to allocate 132426121216 bytes. Error code 12 (Cannot allocate memory)",
        "terminate called after throwing an instance of 'std::bad_alloc'",
    ],
)
def test_host_allocator_failures_are_host_oom(line: str) -> None:
    assert _reason(line) == "host_oom"


def test_a_checkpoint_write_failing_without_enospc_is_storage() -> None:
    """zai-org/ChatGLM-6B#1166: raised inside torch.save, so the frame alone would say framework_error."""
    text = """
Traceback (most recent call last):
  File "/env/lib/python3.9/site-packages/torch/serialization.py", line 441, in save
    _save(obj, opened_zipfile, pickle_module, pickle_protocol)
  File "/env/lib/python3.9/site-packages/torch/serialization.py", line 668, in _save
    zip_file.write_record(name, storage.data_ptr(), num_bytes)
RuntimeError: [enforce fail at inline_container.cc:471] . PytorchStreamWriter failed writing file data/3: file write failed
"""
    assert _reason(text) == "storage_error"


@pytest.mark.parametrize(
    "line",
    [
        "FloatingPointError: Loss became infinite or NaN at iteration=531!",  # detectron2#214
        "ValueError: Network outputs is NAN! Stop Training",  # lizhou-cs/JointNLT#18
        "Loss is nan, stopping training",  # Intellindust-AI-Lab/DEIM#96
    ],
)
def test_divergence_in_other_words(line: str) -> None:
    assert _reason(line) == "loss_divergence"


@pytest.mark.parametrize(
    "text",
    [
        # ray-project/ray#44680
        "2024-04-11 16:38:16,464\tWARNING worker.py:2037 -- The node with node id: 4c44 and address: 10.4.3.95 and "
        "node name: 10.4.3.95 has been marked dead because the detector has missed too many heartbeats from it. "
        "This can happen when a \t(1) raylet crashes unexpectedly (OOM, preempted node, etc.)",
        # kubernetes/kubernetes#62389
        "k8s-node2    NotReady   <none>    2h        v1.10.0",
    ],
)
def test_ray_and_kubernetes_node_deaths(text: str) -> None:
    assert _reason(text) == "node_failure"


@pytest.mark.parametrize(
    "text",
    [
        # ray-project/ray#30312: Ray's memory monitor; its OutOfMemoryError is the host's, not the GPU's
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        # WM-PO/WMPO#3: the raylet's summary
        "(raylet) [2025-12-07 09:57:19,206 E 393463 393463] (raylet) node_manager.cc:3277: 2 Workers (tasks / actors) "
        "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 8289f87b, IP: 10.31.0.226)",
        # openbabel/openbabel#2658 and bcbio/bcbio-nextgen#2393: Slurm's own enforcement, the step cancelled without a reason
        "slurmstepd-falkor7: error: Step 1141810.0 exceeded memory limit (52917772 > 20971520), being killed\n"
        "slurmstepd-falkor7: error: *** STEP 1141810.0 ON falkor7 CANCELLED AT 2023-12-13T08:58:22 ***",
        "slurmstepd-dback-c11-n01: error: Job 848444 exceeded memory limit (33715636 > 32757760), being killed",
        # FederatedAI/KubeFATE#64: the kubelet evicts under node memory pressure
        "4m11s  Warning  Evicted  pod/trainer-worker-0  The node was low on resource: memory. Container trainer was "
        "using 5053216Ki, which exceeds its request of 0.",
    ],
)
def test_memory_monitors_that_kill_before_the_kernel_are_host_oom(text: str) -> None:
    assert _reason(text) == "host_oom"


def test_a_step_that_exceeded_memory_at_some_point_is_only_a_warning() -> None:
    """chaos/slurm#54: old Slurm prints this after jobs that succeeded; alone it is no failure."""
    assert _reason("slurmstepd: Exceeded step memory limit at some point.") == "unknown"


@pytest.mark.parametrize(
    "text",
    [
        # akash-network/support#138 (a DGX node; the container's 137 is the eviction's kill, not the OOM killer)
        "Reason:              Evicted\nMessage:             The node was low on resource: ephemeral-storage. "
        "Threshold quantity: 15763389861, available: 12139364Ki.\n      Exit Code:    137",
        "train-0   ds-ml   Evicted   oct-03-09-compute   Pod The node had condition: [DiskPressure].",  # operate-first/apps#1352
    ],
)
def test_an_eviction_for_local_disk_is_storage(text: str) -> None:
    assert _reason(text) == "storage_error"


@pytest.mark.parametrize(
    "line",
    [
        # vllm-project/vllm#10439, sgl-project/sglang#4895: the KV cache does not fit, in the engines' words
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        # TideDra/lmm-r1#43: vLLM's sleep-mode allocator, capital E
        "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
    ],
)
def test_serving_engines_gpu_memory_shortfalls_are_gpu_oom(line: str) -> None:
    assert _reason(line) == "gpu_oom"


def test_a_nccl_binding_error_without_in_is_nccl() -> None:
    """sgl-project/sglang#4289: sglang's pynccl wrapper raises RuntimeError(f"NCCL error: {error_str}")."""
    text = """
  File "/env/lib/python3.10/site-packages/sglang/srt/distributed/device_communicators/pynccl_wrapper.py", line 329, in NCCL_CHECK
    raise RuntimeError(f"NCCL error: {error_str}")
RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
"""
    assert _reason(text) == "nccl_error"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # ray-project/ray#34971: only that the actor's node died
        (
            "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
            "The actor is dead because its node has died. Node Id: 2eea4cfb179ce7951c4bbdd5ba3029c3a4dcf7cb66db376084f7c270",
            "node_failure",
        ),
        # ray-project/ray#45497: the node's death reason in the error
        (
            "The actor died because its node has died. Node Id: 5d3e0b8a\n"
            "\tthe actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats",
            "node_failure",
        ),
        # ray-project/ray#63807: a node drained for preemption is a preemption, though its node 'died'
        (
            "The actor died because its node has died. Node Id: b157c93d\n"
            "\tthe actor's node was preempted: preemption_integration_demo: simulating node drain",
            "preempted",
        ),
    ],
)
def test_ray_actor_deaths_name_their_node_death(text: str, reason: str) -> None:
    assert _reason(text) == reason


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # patrickbryant1/AFProfile#8, ecmwf-lab/ai-models-graphcast#18, kingoflolz/mesh-transformer-jax#66: XLA's words
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4770354232 bytes.",
            "gpu_oom",
        ),
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for 2.99GiB (3206250496B) on device ordinal 0",
            "gpu_oom",
        ),
        (
            "RuntimeError: Resource exhausted: Failed to allocate request for 32.00MiB (33554432B) on device ordinal 0",
            "gpu_oom",
        ),
        # tensorflow/models#5527: TensorFlow's, on a GPU; the same words on a CPU device are the host's memory
        (
            "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[64,2016,9,9] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
            "gpu_oom",
        ),
        (
            "ResourceExhaustedError: OOM when allocating tensor with shape[100,4096,32] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
            "host_oom",
        ),
        # flatironinstitute/nemos#345: the BFC allocator's warning says itself that it is not a failure
        (
            "W external/xla/xla/tsl/framework/bfc_allocator.cc:310] Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.37GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.",
            "unknown",
        ),
    ],
)
def test_memory_exhaustion_in_xla_and_tensorflow_words(line: str, reason: str) -> None:
    assert _reason(line) == reason


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # jax-ml/jax#15628, jax-ml/jax#22747, LargeWorldModel/LWM#42: XLA's NCCL thunks
        (
            "custom call 'xla.gpu.all_reduce' failed: external/xla/xla/service/gpu/nccl_all_reduce_thunk.cc:244: NCCL operation ncclGroupEnd() failed: unhandled cuda error.",
            "nccl_error",
        ),
        (
            "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled system error (run with NCCL_DEBUG=INFO for details).",
            "nccl_error",
        ),
        # j-towns/vdvae-jax#2: a caller bug, as ncclInvalidUsage is
        (
            "RuntimeError: Internal: nccl_all_reduce_thunk.cc:162: NCCL operation ncclAllReduce(send_buffer, recv_buffer, buffer.element_count, datatype, reduce_op, comm, *cu_stream) failed: invalid usage: while running replica 0",
            "framework_error",
        ),
        # LargeWorldModel/LWM#44: the library is missing, an import problem
        (
            "custom call 'xla.gpu.reduce_scatter' failed: external/xla/xla/service/gpu/nccl_utils.cc:134: NCCL operation ncclGetUniqueId(&id) failed: Unable to load NCCL library. Multi-GPU collectives will not work.",
            "import_error",
        ),
    ],
)
def test_nccl_failures_as_xla_reports_them(line: str, reason: str) -> None:
    assert _reason(line) == reason


@pytest.mark.parametrize(
    "text",
    [
        # aws/aws-ofi-nccl#161: a fabric error through the OFI plugin beats NCCL's generic 'WARN ... error'
        "algo-1:462:1702 [0] ofi_process_cq:1033 NCCL WARN NET/OFI Request completed with error. RC: 21. Error: unknown error.",
        # aws/aws-ofi-nccl#346
        "libfabric:451707:1708520807::efa:cq:efa_rdm_txe_handle_error():737<warn> err: 5, message: Invalid address My EFA addr: fi_addr_efa://[fe80::13:c2ff:fe6f:f03d]:0:1072483550",
        # aws/aws-ofi-nccl#22
        "[ 1632.420956] infiniband efa_0: Failed to process command ALLOC_PD (opcode 14) comp_status 1 err -12",
        # mlcommons/training#272: TensorFlow's ring all-reduce over gRPC
        "E tensorflow/core/common_runtime/ring_reducer.cc:369] Aborting RingReduce with Unavailable: Socket closed",
    ],
)
def test_fabric_errors_under_other_names_are_network(text: str) -> None:
    assert _reason(text) == "network_error"


def test_a_libfabric_warning_that_is_not_an_error_is_not_evidence() -> None:
    line = "libfabric:462:1673041636:efa:core:rxr_info_to_rxr():506<warn> FI_HMEM capability requires RDMA, which this device does not support."
    assert _reason(line) == "unknown"


@pytest.mark.parametrize(
    "text",
    [
        # MicrosoftDocs/azure-docs#66288
        "PreemptionError: Nodes of this job got pre-empted. Check if the run has failed or restarted.",
        # microsoft/pai#3806: Azure's scheduled-events document
        '{"DocumentIncarnation":3,"Events":[{"EventId":"9C3A","EventType":"Preempt","ResourceType":"VirtualMachine"}]}',
    ],
)
def test_cloud_preemption_in_other_words(text: str) -> None:
    assert _reason(text) == "preempted"


def test_nvidia_smi_uncorrectable_ecc_count_beats_the_oom_it_causes() -> None:
    """NVIDIA/k8s-device-plugin#267: every job on the GPU fails with 'CUDA error: out of memory'."""
    smi = _src(
        "nvidia-smi.txt",
        """
|   0  Tesla V100S-PCI...  Off  | 00000000:00:07.0 Off |                    0 |
|   1  Tesla V100S-PCI...  Off  | 00000000:00:08.0 Off |                    1 |
|   2  NVIDIA GeForce ...  On   | 00000000:01:00.0  On |                  N/A |
""",
    )
    log = _src("train.log", "RuntimeError: CUDA error: out of memory")
    assert diagnose_rules([log, smi]).reason == "gpu_hardware"
    healthy = _src("nvidia-smi.txt", "|   0  Tesla V100S-PCI...  Off  | 00000000:00:07.0 Off |                    0 |")
    assert diagnose_rules([log, healthy]).reason == "gpu_oom"


def test_ray_1x_memory_monitor_is_the_host_not_the_gpu() -> None:
    """ray-project/ray#10431: its class name ends in OutOfMemoryError, like torch's."""
    line = "ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node gpu-w27 is used (178.1 / 187.4 GB)."
    assert _reason(line) == "host_oom"


def test_a_pod_stopped_by_graceful_node_shutdown_is_preempted() -> None:
    """kubernetes/kubernetes#102840: the kubelet's reason and message; the container's 143 follows from it."""
    text = "Reason:       Terminated\nMessage:      Pod was terminated in response to node shutdown.\n      Exit Code:    143"
    assert _reason(text) == "preempted"


# ---------------------------------------------------------------- priority beats context


def test_a_survived_oom_does_not_beat_the_fatal_error_after_it() -> None:
    """fairseq#2867's recovered OOM, hundreds of updates, then returnn#1829's failed checkpoint write."""
    text = """
2020-11-06 22:55:35 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: CUDA out of memory. Tried to allocate 28.00 MiB (GPU 1; 10.92 GiB total capacity; 10.13 GiB already allocated; 13.38 MiB free; 10.33 GiB reserved in total by PyTorch)
2020-11-06 22:55:35 | WARNING | fairseq.trainer | attempting to recover from OOM in forward/backward pass
2020-11-06 22:57:12 | INFO | train_inner | epoch 002:   4600 / 21194 loss=2.311, nll_loss=0.912, ppl=1.88, wps=4211.3, ups=1.02, num_updates=25800, lr=1.2e-05
2020-11-06 23:10:40 | INFO | train_inner | epoch 002:   5400 / 21194 loss=2.298, nll_loss=0.904, ppl=1.87, wps=4230.8, ups=1.02, num_updates=26600, lr=1.2e-05
Traceback (most recent call last):
  File "/env/lib/python3.6/site-packages/torch/serialization.py", line 1266, in _save
    zip_file.write_record(name, storage, num_bytes)
RuntimeError: [enforce fail at inline_container.cc:857] . PytorchStreamWriter failed writing file data/322: file write failed
"""
    d = diagnose_rules([_src("train.log", text)])
    assert d.reason == "storage_error"
    assert "gpu_oom" in d.explanation  # still reported, as a consequence


def test_an_oom_that_ends_the_run_is_not_survived() -> None:
    """fairseq#869: the OOM batch is skipped and the process dies at once: no progress in between."""
    text = """
| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.93 GiB total capacity; 7.20 GiB already allocated; 17.56 MiB free; 46.25 MiB cached);
 Skipping batch
Traceback (most recent call last):
  File "./fairseq/train.py", line 306, in <module>
    cli_main()
Exception:
"""
    assert _reason(text) == "gpu_oom"


# ---------------------------------------------------------------- tracebacks after a tqdm bar


def test_a_traceback_glued_to_a_tqdm_bar_is_followed() -> None:
    """SWivid/F5-TTS#458: the bar ends in a carriage return the collector did not keep."""
    text = """
Epoch 4/5:   0%|                 | 0/33 [00:01<?, ?step/s, loss=0.688, step=100][rank0]: Traceback (most recent call last):
[rank0]:   File "/opt/conda/envs/venv/lib/python3.10/site-packages/torch/serialization.py", line 652, in save
[rank0]:     _save(obj, opened_zipfile, pickle_module, pickle_protocol, _disable_byteorder_record)
[rank0]:   File "/opt/conda/envs/venv/lib/python3.10/site-packages/torch/serialization.py", line 866, in _save
[rank0]:     zip_file.write_record('data.pkl', data_value, len(data_value))
[rank0]: RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data.pkl: file write failed
"""
    assert normalize(text.strip().splitlines()[0]) == ("Traceback (most recent call last):", 0)
    d = diagnose_rules([_src("train.log", text)])
    assert (d.reason, d.rank, d.evidence[0].line) == ("storage_error", 0, 6)


def test_a_user_exception_after_a_tqdm_bar_is_classified_by_its_frame() -> None:
    """yolov7#1153's shape: a tqdm bar, then a KeyError raised in the user's test.py (the traceback header
    starts its own line here, the exception is classified by the last frame: user code)."""
    text = """
               Class      Images      Labels           P           R      mAP@.5  mAP@.5:.95:   0% 0/7 [00:00<?, ?it/s]Traceback (most recent call last):
  File "train.py", line 562, in <module>
    train(hyp, opt, device, tb_writer)
  File "/content/drive/yolov7/test.py", line 200, in <listcomp>
    "domain": "pixel"} for *xyxy, conf, cls in pred.tolist()]
KeyError: 0.64453125
"""
    assert _reason(text) == "script_error"


def test_a_launcher_error_glued_to_a_tqdm_bar_keeps_its_meaning() -> None:
    """zai-org/ChatGLM2-6B#525."""
    line = (
        "Loading checkpoint shards:  57% 4/7 [00:37<00:28,  9.42s/it]ERROR:torch.distributed.elastic.multiprocessing"
        ".api:failed (exitcode: -9) local_rank: 0 (pid: 8180) of binary: /usr/bin/python3"
    )
    assert _reason(line) == "host_oom"


# ---------------------------------------------------------------- the message first, the frame second


def test_an_argument_error_raised_inside_transformers_is_an_argument_error() -> None:
    """CircleRadon/TokenPacker#23: the last frame is hf_argparser.py (framework code)."""
    text = """
Traceback (most recent call last):
  File "/root/LLaVA/llava/train/train.py", line 793, in train
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()
  File "/root/miniconda3/envs/llava/lib/python3.10/site-packages/transformers/hf_argparser.py", line 348, in parse_args_into_dataclasses
    raise ValueError(f"Some specified arguments are not used by the HfArgumentParser: {remaining_args}")
ValueError: Some specified arguments are not used by the HfArgumentParser: ['--scale_factor', '2']
"""
    assert _reason(text) == "argument_error"


def test_a_process_prefix_does_not_hide_the_exception() -> None:
    """kaito-project/kaito#2086: vLLM writes '(EngineCore pid=169) ' before every line."""
    text = (
        "(EngineCore pid=169) ImportError: libcudart.so.13: cannot open shared object file: No such file or directory"
    )
    assert _reason(text) == "import_error"
    assert normalize("(VllmWorker rank=3 pid=226) WorkerProc hit an exception.") == ("WorkerProc hit an exception.", 3)


# ---------------------------------------------------------------- nodes named by the text


def test_a_node_failure_names_the_node_its_message_names() -> None:
    """nebius/soperator#854."""
    d = diagnose_rules([_src("salloc.log", "salloc: error: Node failure on worker-1")])
    assert (d.reason, d.node) == ("node_failure", "worker-1")


# ---------------------------------------------------------------- evidence weighed with its context


def test_a_traceback_after_carriage_return_joined_bars_keeps_its_rank_and_its_type() -> None:
    """SWivid/F5-TTS#458's bar, redrawn with carriage returns the collector kept inside one line, and
    cvg/glue-factory#47's KeyError written after the last redraw, behind its rank prefix: what a terminal
    shows last is the line."""
    bars = "\r".join(
        f"[rank0]: Epoch 4/5:   {p}%|          | {n}/33 [00:0{n}<?, ?step/s, loss=0.688, step=100]"
        for p, n in ((0, 0), (3, 1))
    )
    text = [
        bars + "\r[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/home/user0/workspace/glue-factory/gluefactory/train.py", line 560, in training',
        "[rank0]:     if results[conf.train.best_key] < best_eval:",
        "[rank0]: Epoch 4/5:   6%|▌         | 2/33 [00:02<00:41,  1.33s/step, loss=0.671, step=101]\r[rank0]: KeyError: 'loss/total'",
    ]
    assert normalize(text[0]) == ("Traceback (most recent call last):", 0)
    d = diagnose_rules([LogSource("train.log", text)])
    assert (d.reason, d.rank, d.evidence[0].line) == ("script_error", 0, 4)
    # a bar whose counts are scaled (1.03G/1.03G) is a bar too
    glued = "model.safetensors: 100%|██████████| 1.03G/1.03G [00:12<00:00, 85.2MB/s]KeyError: 'loss/total'"
    assert normalize(glued) == ("KeyError: 'loss/total'", None)


def test_an_oom_the_run_said_it_recovered_from_does_not_beat_the_write_failure_after_it() -> None:
    """fairseq#2867's OOM, which fairseq logs as a WARNING and recovers from, then returnn#1829's failed
    checkpoint write with no step in between: the warning did not end the run, the write did."""
    text = """
2020-11-06 22:55:35 | WARNING | fairseq.trainer | OOM: Ran out of memory with exception: CUDA out of memory. Tried to allocate 28.00 MiB (GPU 1; 10.92 GiB total capacity; 10.13 GiB already allocated; 13.38 MiB free; 10.33 GiB reserved in total by PyTorch)
2020-11-06 22:55:35 | WARNING | fairseq.trainer | attempting to recover from OOM in forward/backward pass
2020-11-06 22:55:41 | INFO | fairseq.checkpoint_utils | Preparing to save checkpoint for epoch 2 @ 25800 updates
Traceback (most recent call last):
  File "/env/lib/python3.6/site-packages/torch/serialization.py", line 1266, in _save
    zip_file.write_record(name, storage, num_bytes)
RuntimeError: [enforce fail at inline_container.cc:857] . PytorchStreamWriter failed writing file data/322: file write failed
"""
    d = diagnose_rules([_src("train.log", text)])
    assert (d.reason, d.evidence[0].line) == ("storage_error", 7)
    assert "gpu_oom" in d.explanation
    # fairseq#869: the same warning, then an exception that says nothing: the OOM stays the cause
    bare = """
| WARNING: ran out of memory with exception: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.93 GiB total capacity; 7.20 GiB already allocated; 17.56 MiB free; 46.25 MiB cached);
Traceback (most recent call last):
  File "./fairseq/train.py", line 306, in <module>
Exception:
"""
    assert _reason(bare) == "gpu_oom"


def test_an_exit_signal_written_by_the_launcher_outweighs_a_warning_before_it() -> None:
    """chenyilun95/DSGN2#11: mmdet's warning that the pretrained weights do not match, with its
    'size mismatch for' lines (a loader that is not strict goes on), then torchrun's summary of a rank
    killed by SIGKILL (hpcaitech/ColossalAI#3514's wording): the kill ended the run, not the warning."""
    text = """
2023-03-02 11:20:41,205 - mmdet - INFO - load checkpoint from local path: pretrained/resnet34.pth
2023-03-02 11:20:41,517 - mmdet - WARNING - The model and loaded state dict do not match exactly
size mismatch for layer3.0.conv1.weight: copying a param with shape torch.Size([256, 128, 3, 3]) from checkpoint, the shape in current model is torch.Size([128, 128, 3, 3]).
size mismatch for layer3.0.bn1.weight: copying a param with shape torch.Size([256]) from checkpoint, the shape in current model is torch.Size([128]).
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 812914 closing signal SIGTERM
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 1 (pid: 812915) of binary: /data/env/bin/python
Root Cause (first observed failure):
[0]:
  time      : 2023-03-02_11:31:09
  host      : gpu-cc02
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 812915)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 812915
============================================================
"""
    d = diagnose_rules([_src("torchrun.log", text)])
    assert (d.reason, d.rank) == ("host_oom", 1)
    assert "checkpoint_load_error" in d.explanation
    # alone, the same lines are the evidence they look like
    assert _reason("\n".join(text.strip().splitlines()[:4])) == "checkpoint_load_error"
    # and an exit the collector knows (exit status 137) weighs the same as one written in the text
    warning_only = _src("rank1.log", "\n".join(text.strip().splitlines()[:4]), exit_code=137)
    assert diagnose_rules([warning_only]).reason == "host_oom"


# ---------------------------------------------------------------- batch 5 (cases 227-262): the classes it missed


@pytest.mark.parametrize(
    "line",
    [
        # deepspeedai/DeepSpeed#3232: the deepspeed launcher's own sentence for a SIGKILLed rank
        "[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', 'main.py', "
        "'--local_rank=0', '--zero_stage', '2', '--deepspeed'] exits with return code = -9",
        # the same exit as subprocess and the elastic agent's error handler word it
        "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit status 137.",
    ],
)
def test_launcher_exit_sentences_in_other_words_are_kills(line: str) -> None:
    assert _reason(line) == "host_oom"


def test_a_segfault_the_launcher_reports_is_a_framework_crash_unless_a_library_is_named() -> None:
    """NVIDIA/Megatron-LM#1880: only torchrun's summary tells of the SIGSEGV; alone it is a crash in
    native framework code. It is weak: case 026's ranks name the NCCL failure it caused."""
    summary = """
E1223 05:17:59.420000 3304101 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -11) local_rank: 0 (pid: 3304209) of binary: /usr/bin/python
Root Cause (first observed failure):
[0]:
  time      : 2025-12-23_05:17:58
  host      : yotta-B200-232
  rank      : 0 (local_rank: 0)
  exitcode  : -11 (pid: 3304209)
  error_file: <N/A>
  traceback : Signal 11 (SIGSEGV) received by PID 3304209
============================================================
"""
    assert _reason(summary) == "framework_error"
    remote = (
        "[rank5]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        "remote process exited or there was a network error, NCCL version 2.22.3"
    )
    assert _reason(remote + "\n" + summary) == "nccl_error"


def test_a_non_finite_grad_norm_in_megatron_cores_words_is_divergence() -> None:
    """NVIDIA-NeMo/Speech#14751."""
    line = (
        "i.pretrain/0 [rank4]: RuntimeError: Unexpected result inf (message='found Inf in local grad norm for bucket #6 "
        "in backward pass before data-parallel communication collective')"
    )
    assert _reason(line) == "loss_divergence"


def test_a_rendezvous_store_that_cannot_be_reached_is_the_network_not_the_framework() -> None:
    """pytorch/pytorch#69197: the RuntimeError is raised inside torch, but its message says what failed."""
    text = """
Traceback (most recent call last):
  File "/home/user7/miniconda3/envs/py39/lib/python3.9/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 155, in _create_tcp_store
    store = TCPStore(
RuntimeError: connect() timed out. Original timeout was 60000 ms.

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/user7/miniconda3/envs/py39/lib/python3.9/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 159, in _create_tcp_store
    raise RendezvousConnectionError(
torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.
"""
    assert _reason(text) == "network_error"


def test_a_worker_that_exited_in_the_single_pid_wording_is_a_dataloader_error() -> None:
    """CSAILVision/semantic-segmentation-pytorch#80."""
    assert (
        _reason("RuntimeError: DataLoader worker (pid 7948) exited unexpectedly with exit code 1") == "dataloader_error"
    )


# ---------------------------------------------------------------- batch 6 (cases 263-299): the classes it missed


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # yym6472/ConSERT#27: transformers' words for a checkpoint it cannot read, raised as a bare OSError
        (
            "OSError: Unable to load weights from pytorch checkpoint file. If you tried to load a PyTorch model from a "
            "TF 2.0 checkpoint, please set from_tf=True. ",
            "checkpoint_load_error",
        ),
        # TheAtticusProject/cuad#9: the old torch wording of an NCCL failure
        (
            "terminate called after throwing an instance of 'std::runtime_error'\n  what():  NCCL Error 1: unhandled cuda error",
            "nccl_error",
        ),
        # NVIDIA/nccl#1283: NCCL's own 'Cuda failure' line behind a Ray prefix
        (
            "(train_rft pid=2657296) 2024-05-11 14:10:52.227 n176-080-198:2657296:2658232 [0] include/alloc.h:102 NCCL WARN "
            "Cuda failure 1 'invalid argument'",
            "nccl_error",
        ),
        # deepspeedai/DeepSpeed#3581: the deepspeed launcher's segfault sentence
        (
            "[2023-05-20 12:09:28,634] [ERROR] [launch.py:434:sigkill_handler] ['python', '-u', 'main.py', "
            "'--local_rank=0'] exits with return code = -11",
            "framework_error",
        ),
        # hiyouga/LlamaFactory#6191: a ValueError whose message names the missing file
        ("[rank5]: ValueError: File data/mllm_dome.json not found.", "file_not_found"),
    ],
)
def test_messages_that_name_their_cause_whatever_raised_them(text: str, reason: str) -> None:
    assert _reason(text) == reason


def test_an_ordinal_past_the_visible_gpus_is_the_launch_not_cuda() -> None:
    """yunqing-me/WatermarkDM#8: --nproc_per_node larger than the machine's GPUs."""
    text = """
  File "/opt/conda/lib/python3.9/site-packages/torch/cuda/__init__.py", line 326, in set_device
    torch._C._cuda_setDevice(device)
RuntimeError: CUDA error: invalid device ordinal
CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be incorrect.
"""
    d = diagnose_rules([_src("torchrun.log", text)])
    assert (d.reason, d.action) == ("argument_error", "notify")


def test_nccl_denied_a_system_call_is_a_permission_error() -> None:
    """pytorch/pytorch#37004: /dev/shm not writable; torch only says 'unhandled system error'."""
    text = """
node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied
node08:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-b7948f403864987a-0-3-0 (size 4460544)
RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1565272279342/work/torch/lib/c10d/ProcessGroupNCCL.cpp:290, unhandled system error
"""
    assert _reason(text) == "permission_error"


@pytest.mark.parametrize(
    "text",
    [
        # NVIDIA/nccl#2076: the socket failure is the remote error's "Last error", on its own line
        "[rank2]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
        "[rank2]: Last error:\n"
        "[rank2]: socketProgressOpt: Call to recv from 172.16.8.21<33759> failed : Connection reset by peer",
        # NVIDIA/nccl#1514: without the NCCL WARN prefix
        "ncclInternalError: Internal check failed.\nLast error:\nNet : Connection closed by remote peer user<43236>",
    ],
)
def test_the_socket_failure_behind_an_nccl_error_is_the_network(text: str) -> None:
    assert _reason(text) == "network_error"


def test_a_task_launch_that_fails_on_one_node_blames_it() -> None:
    """ai4d-iasc/trixie#58: after a reboot, cn131 cannot launch tasks."""
    d = diagnose_rules(
        [_src("slurm-36.out", "srun: error: Task launch for 36.0 failed on node cn131: Job credential expired")]
    )
    assert (d.reason, d.node) == ("node_failure", "cn131")


# ---------------------------------------------------------------- batch 7 (cases 300-322): the classes it missed


def test_advice_glued_after_the_message_does_not_hide_it() -> None:
    """ostris/ai-toolkit#470: the error and torch's advice sentences on one line. The advice covers what
    follows it; a warning tag before a message (UserWarning: ... No module named) still hides it."""
    line = (
        "Error running job: CUDA error: uncorrectable ECC error encountered Search for `cudaErrorECCUncorrectable' in "
        "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information. CUDA kernel errors "
        "might be asynchronously reported at some other API call, so the stacktrace below might be incorrect. For debugging "
        "consider passing CUDA_LAUNCH_BLOCKING=1 Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."
    )
    assert _reason(line) == "gpu_hardware"
    warning = "functional_tensor.py:368: UserWarning: Failed to initialize NumPy: No module named 'numpy'"
    assert _reason(warning) == "unknown"


@pytest.mark.parametrize(
    "text",
    [
        # unslothai/unsloth#2992: IPython's frames ("path in func(...)") end inside the library
        """
KeyError                                  Traceback (most recent call last)
/usr/local/lib/python3.11/dist-packages/unsloth_zoo/loss_utils.py in _unsloth_get_batch_samples(self, epoch_iterator, num_batches, device, *args, **kwargs)
    315                 if "token_type_ids" in x:
--> 316                     token_type_ids = kwargs["token_type_ids"]

KeyError: 'token_type_ids'
""",
        # zai-org/GLM-4#699: rich's boxed frames ("│ path:line in func │")
        """
╭───────────────────── Traceback (most recent call last) ─────────────────────╮
│ /home/user35/project/GLM-4/finetune_demo/finetune.py:470 in main                                │
│ /home/user35/project/GLM-4/venv/lib/python3.10/site-packages/transformers/trainer_seq2seq.py:356 │
│ in prediction_step                                                                               │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
KeyError: 'loss'
""",
    ],
)
def test_ipython_and_rich_frames_place_the_exception_in_the_framework(text: str) -> None:
    assert _reason(text) == "framework_error"


# ---------------------------------------------------------------- exceptions wrapped by a runtime


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # verl-project/verl#1306: Ray re-raises the task's exception with the type in parentheses and
        # no message, so the line never starts with the exception's own name
        ("ray.exceptions.RayTaskError(SyntaxError): <no detail available>", "syntax_error"),
        ("ray.exceptions.RayTaskError(ModuleNotFoundError): ray::WorkerDict.__ray_call__()", "import_error"),
        ("ray.exceptions.RayTaskError(FileNotFoundError): ray::TaskRunner.run()", "file_not_found"),
        ("ray.exceptions.RayTaskError(PermissionError): ray::TaskRunner.run()", "permission_error"),
    ],
)
def test_a_ray_wrapped_exception_keeps_the_reason_of_its_type(text: str, reason: str) -> None:
    assert _reason(text) == reason


def test_a_missing_file_in_a_dataloader_worker_is_file_not_found() -> None:
    """wgcban/ddpm-cd#4: the worker wrapper re-raises a missing path; the path is the cause, not the
    DataLoader (a decode error in a worker stays dataloader_error)."""
    text = """
FileNotFoundError: Caught FileNotFoundError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/opt/conda/lib/python3.9/site-packages/torch/utils/data/_utils/worker.py", line 287, in _worker_loop
    data = fetcher.fetch(index)
FileNotFoundError: [Errno 2] No such file or directory: 'dataset/CDD-256/A/filenames.txt'
"""
    assert _reason(text) == "file_not_found"
    assert _reason("PermissionError: Caught PermissionError in DataLoader worker process 2.") == "permission_error"
    assert (
        _reason("PIL.UnidentifiedImageError: Caught UnidentifiedImageError in DataLoader worker process 3.")
        == "dataloader_error"
    )


def test_a_c_runtime_system_error_number_13_is_a_permission_error() -> None:
    """jupyterhub/zero-to-jupyterhub-k8s#2756: Intel's OpenMP runtime writes errno 13 as
    'System error #13', with no Python exception and no [Errno 13]."""
    text = """
OMP: Error #179: Function Can't open SHM2 failed:
OMP: System error #13: Permission denied
"""
    assert _reason(text) == "permission_error"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # vllm-project/vllm#6823: the multiproc monitor's account of a worker's SIGSEGV
        (
            "ERROR 07-26 14:50:35 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 214281 died, exit code: -11",
            "framework_error",
        ),
        # the same monitor's wording for a SIGKILL
        (
            "ERROR 03-21 09:12:01 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 51234 died, exit code: -9",
            "host_oom",
        ),
    ],
)
def test_a_worker_monitor_that_writes_died_exit_code_minus_n(text: str, reason: str) -> None:
    assert _reason(text) == reason


# ---------------------------------------------------------------- the NVLink fabric behind NCCL's NVLS transport


@pytest.mark.parametrize(
    "text",
    [
        # NVIDIA/DCGM#304: a node whose NVLink got into a bad state fails NVLS set-up
        "gpu-stress-dgc86-xfpt6:420:437 [5] transport/nvls.cc:379 (nvlsAllocateMem) NCCL WARN Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 'the operation cannot be performed in the present state'.",
        # NVIDIA/nccl#1562: the same transport failing on an H200 node whose fabric manager had died
        "gpu46:78367:78492 [0] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
        "Jan 03 08:12:40 gpu46 systemd[1]: nvidia-fabricmanager.service: Main process exited, code=exited, status=1/FAILURE",
    ],
)
def test_a_failing_nvls_transport_or_fabric_manager_is_the_nvlink_fabric(text: str) -> None:
    assert _reason(text) == "nvlink_error"


# ---------------------------------------------------------------- shell tools' own permission wording


@pytest.mark.parametrize(
    "text",
    [
        # nextflow-io/nextflow#638: coreutils name themselves, then the path, then strerror
        "mktemp: failed to create directory via template `/dev/shm/nxf.XXXXXXXXXX': Permission denied",
        "mkfifo: cannot create fifo `/.command.out': Permission denied",
        # awslabs/awsome-distributed-ai#184: mkdir inside the container runtime's log, behind pyxis's prefix
        "slurmstepd: error: pyxis:     mkdir: cannot create directory '/opt/dlami/nvme/tmp/enroot/data': Permission denied",
    ],
)
def test_a_shell_tool_denied_a_path_is_a_permission_error(text: str) -> None:
    assert _reason(text) == "permission_error"


# ---------------------------------------------------------------- the round of cases 409-464


def test_a_wrapper_that_points_to_the_root_cause_above_is_its_consequence() -> None:
    """vllm-project/vllm#17939: the worker's own OOM wording ('CUDA out of memory occurred when warming up
    sampler'), then the front end's RuntimeError that only says where to look."""
    log = """
(VllmWorker rank=1 pid=2445156) ERROR 05-10 16:00:15 [multiproc_executor.py:470] RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine.
ERROR 05-10 16:00:16 [core.py:396] EngineCore failed to start.
Traceback (most recent call last):
  File "/opt/venv/lib/python3.10/site-packages/vllm/v1/utils.py", line 494, in wait_for_engine_startup
    raise RuntimeError("Engine core initialization failed. "
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_0': 1}
"""
    assert _reason(log) == "gpu_oom"
    alone = diagnose_rules([_src("serve.log", log.strip().splitlines()[-1])])
    assert (alone.reason, alone.confidence < 0.7) == ("framework_error", True)  # weak: the LLM is asked


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # vllm-project/vllm#25837: too little free GPU memory for the fraction asked, raised as a ValueError
        (
            "(EngineCore_DP0 pid=17374) ERROR 09-28 15:47:24 [core.py:718] ValueError: Free memory on device (3.22/4.0 GiB) on startup is less than desired GPU memory utilization (0.9, 3.6 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
            "gpu_oom",
        ),
        # vllm-project/vllm#18730: torch.compile's Triton build cannot link against the driver library
        ("/usr/bin/ld: cannot find -lcuda: No such file or directory", "import_error"),
        # pytorch/pytorch#47445: the DataLoader's pin-memory thread, not a worker
        ("RuntimeError: Pin memory thread exited unexpectedly", "dataloader_error"),
        # open-mmlab/mmagic#508: two ranks' copies of it interleaved into one line
        ("RuntimeError: RuntimeErrorPin memory thread exited unexpectedly:", "dataloader_error"),
        # mozilla/translations#964: a GCP spot VM's worker journal before the power-off
        (
            "Dec 17 16:03:58Z translations-1-b-linux-v100-gpu-4 start-worker 2024/12/17 16:03:58 GCP Metadata Service says termination is imminent",
            "preempted",
        ),
        # ray-project/ray#22425: the raylet's own fatal line (its typo kept)
        ("[2022-02-16 12:46:52,789 C 149 149] node_manager.cc:170: This node has beem marked as dead.", "node_failure"),
    ],
)
def test_other_phrasings_of_known_signatures(text: str, reason: str) -> None:
    assert _reason(text) == reason


@pytest.mark.parametrize(
    "text",
    [
        # huggingface/trl#6168: raised from trl's own frame, but the caller's keyword is the cause
        """
Traceback (most recent call last):
  File "/home/lab/Comm_Pretrain.py", line 596, in <module>
    sfttrainer = SFTTrainer(
  File "/opt/conda/lib/python3.10/site-packages/trl/trainer/sft_trainer.py", line 401, in __init__
    super().__init__(
TypeError: Trainer.__init__() got an unexpected keyword argument 'tokenizer'
""",
        # unslothai/unsloth#2010: through transformers' deprecation wrapper
        """
Traceback (most recent call last):
  File "/home/dev/finetune/train.py", line 141, in train_model
    trainer = SFTTrainer(model=self.model,
  File "/miniconda3/envs/unsloth/lib/python3.10/site-packages/transformers/utils/deprecation.py", line 172, in wrapped_func
    return func(*args, **kwargs)
TypeError: SFTTrainer.__init__() got an unexpected keyword argument 'dataset_num_proc'
""",
    ],
)
def test_a_call_that_does_not_fit_the_signature_is_the_scripts_error(text: str) -> None:
    assert _reason(text) == "script_error"


_LIGHTNING_LOAD = """
Traceback (most recent call last):
  File "eval.py", line 108, in <module>
    **transformer_config
  File "/opt/conda/lib/python3.6/site-packages/pytorch_lightning/core/saving.py", line 157, in load_from_checkpoint
    model = cls._load_model_state(checkpoint, strict=strict, **kwargs)
  File "/opt/conda/lib/python3.6/site-packages/pytorch_lightning/core/saving.py", line 205, in _load_model_state
    model.load_state_dict(checkpoint['state_dict'], strict=strict)
KeyError: 'state_dict'
"""


def test_a_bare_exception_raised_while_loading_a_checkpoint_is_the_checkpoints() -> None:
    """Lightning-AI/pytorch-lightning#13288: the file lacks the entry Lightning reads. The same KeyError
    raised in the script's own code after a load is still the script's."""
    assert _reason(_LIGHTNING_LOAD) == "checkpoint_load_error"
    # bytedance/music_source_separation#20: a weights-only checkpoint, through the checkpoint connector
    resume = """
Traceback (most recent call last):
  File "bytesep/train.py", line 296, in train
    trainer.fit(pl_model)
  File "/opt/conda/lib/python3.6/site-packages/pytorch_lightning/trainer/connectors/checkpoint_connector.py", line 143, in restore_training_state
    self.restore_optimizers_and_schedulers()
  File "/opt/conda/lib/python3.6/site-packages/pytorch_lightning/trainer/connectors/checkpoint_connector.py", line 210, in restore_optimizers_and_schedulers
    "Trying to restore training state but checkpoint contains only the model."
KeyError: 'Trying to restore training state but checkpoint contains only the model. This is probably due to `ModelCheckpoint.save_weights_only` being set to `True`.'
"""
    assert _reason(resume) == "checkpoint_load_error"
    user_code = _LIGHTNING_LOAD.replace(
        "KeyError: 'state_dict'",
        '  File "eval.py", line 120, in <module>\n    print(cfg["threshold"])\nKeyError: \'threshold\'',
    )
    assert _reason(user_code) == "script_error"


def test_ipythons_exception_header_names_what_ray_wrapped() -> None:
    """project-codeflare/codeflare-sdk#193: a notebook's header line is the only place the type appears,
    and the traceback's final line was never kept."""
    log = """
(train_fn pid=306) There was a problem when trying to write in your cache folder (/home/ray/.cache/huggingface/hub). You should set the environment variable TRANSFORMERS_CACHE to a writable directory.
---------------------------------------------------------------------------
RayTaskError(PermissionError)             Traceback (most recent call last)
Cell In [26], line 2
      1 #call the above cell as a remote ray function
----> 2 ray.get(train_fn.remote())
"""
    assert _reason(log) == "permission_error"


def test_a_loss_scale_halved_to_nothing_is_divergence_but_an_ordinary_overflow_is_not() -> None:
    """Junjue-Wang/FactSeg#6: apex halves the scale down to a denormal. NVIDIA/apex#493 and
    facebookresearch/swav#47: the same message at ordinary scales is mixed precision working."""
    diverged = """
Warning: NaN or Inf found in input tensor.
Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 2.53e-321
Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1.265e-321
"""
    assert _reason(diverged) == "loss_divergence"
    ordinary = """
Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 256.0
Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0
Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 1.52587890625e-05
"""
    assert _reason(ordinary) == "unknown"


@pytest.mark.parametrize(
    ("text", "node"),
    [
        # ray-project/ray#15128: the GCS names the lost node by its IP
        (
            "The node with node id: 75b2eec8a61cdafd37cc8072b1caf9abdeef9c4e74a4f24d5dfce28d and ip: 10.4.4.107 has been marked dead because the detector has missed too many heartbeats from it. This can happen when a raylet crashes unexpectedly or has lagging heartbeats.",
            "10.4.4.107",
        ),
        # ray-project/kuberay#3827: the newer wording, with the node's name
        (
            '{"label":"RAY_NODE_REMOVED","message":"The node with node id: ada3a3771fac751bd7c6b674e3b5e2df045b93550e6d31a410cad0be and address: 156.176.0.154 and node name: 156.176.0.154 has been marked dead because the detector has missed too many heartbeats from it.","severity":"ERROR","source_type":"GCS"}',
            "156.176.0.154",
        ),
        # ray-project/ray#58638: a task's own error when its node died
        (
            "Task failed because the node it was running on is dead or unavailable. Node IP: 127.0.0.1, node ID: e55b8ca03ebf3f7418f51533d8d55abeaab75fa9b29e2e6282b47646. This can happen if the node was preempted, had a hardware failure, or its raylet crashed unexpectedly.",
            "127.0.0.1",
        ),
        # kubectl get events: the node controller's account
        (
            "49m         Normal    NodeNotReady     node/ip-10-59-35-68.eu-west-1.compute.internal    Node ip-10-59-35-68.eu-west-1.compute.internal status is now: NodeNotReady",
            "ip-10-59-35-68.eu-west-1.compute.internal",
        ),
    ],
)
def test_cluster_frameworks_name_the_node_that_died(text: str, node: str) -> None:
    d = diagnose_rules([_src("events.log", text)])
    assert (d.reason, d.action, d.node) == ("node_failure", "restart_exclude_node", node)


def test_an_nvidia_smi_row_that_reads_err_is_a_gpu_the_driver_lost() -> None:
    """NVIDIA/open-gpu-kernel-modules#446: after Xid 119 (GSP RPC timeouts) nvidia-smi cannot read one GPU,
    whose row says ERR! in every field, the uncorrectable-ECC column included; the other rows read 0."""
    table = """
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   2  NVIDIA A30          Off  | 00000000:41:00.0 Off |                    0 |
| N/A   42C    P0   141W / 165W |  14992MiB / 24576MiB |     33%      Default |
|   3  ERR!                Off  | 00000000:61:00.0 Off |                 ERR! |
|ERR!  ERR! ERR!    ERR! / ERR! |  23025MiB / 24576MiB |    ERR!      Default |
|   4  NVIDIA A30          Off  | 00000000:81:00.0 Off |                    0 |
"""
    d = diagnose_rules([_src("nvidia-smi-a30-node07.txt", table)])
    assert (d.reason, d.node, d.evidence[0].line) == ("gpu_hardware", "a30-node07", 6)
    healthy = "\n".join(line for line in table.splitlines() if "ERR!" not in line)
    assert _reason(healthy) == "unknown"


_IB_PROXY = """
gpu5:35917:35994 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129
gpu5:35917:35994 [0] NCCL INFO transport.cu:163 -> 2 [Proxy Thread]
gpu4:35902:35977 [0] transport/net_ib.cu:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129
gpu5:35917:35917 [0] NCCL INFO Destroyed comm 0x7f24c4001af0 rank 4"""
_CUDA_AFTER = """
gpu5:35917:35917 [1] init.cu:194 NCCL WARN Cuda failure 'an illegal memory access was encountered'
gpu5: Test NCCL failure common.cu:343 'unhandled cuda error'"""


def test_a_cuda_fault_after_the_network_failed_is_its_consequence_not_the_other_way_round() -> None:
    """NVIDIA/nccl-tests#24: GPUDirect RDMA between two servers; both proxy threads get IB completion
    error 12 first, and only then does a CUDA call fail. A GPU that faults first still outranks the network
    errors that follow it (the peers of a crashed rank lose their connections)."""
    assert _reason(_IB_PROXY + _CUDA_AFTER) == "network_error"
    assert _reason(_CUDA_AFTER + _IB_PROXY) == "cuda_error"


def test_a_communicator_aborted_for_a_watchdog_timeout_is_the_timeout() -> None:
    """NVIDIA/nccl#1438 (case 475): the timeout reaches SyncBatchNorm's backward as 'NCCL communicator was
    aborted ... Original reason for failure was: ... Watchdog caught collective operation timeout', and the
    launcher reports exitcode -6 (the abort). An abort for another reason stays an NCCL error."""
    text = """
RuntimeError: NCCL communicator was aborted on rank 0.  Original reason for failure was: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=35582, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800366 milliseconds before timing out.
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 886321 closing signal SIGTERM
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 1 (pid: 886322) of binary: /home/user/.conda/envs/allspark/bin/python
"""
    assert _reason(text) == "nccl_timeout"
    assert _reason("RuntimeError: NCCL communicator was aborted on rank 2.") == "nccl_error"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # FlagAI-Open/FlagAI#553 (case 490): bash in a zh_CN locale, with a full-width colon
        ("bmtrain_mgpu.sh: 行 84: torchrun\uff1a未找到命令", "file_not_found"),
        # glibc's zh_CN strerror for ENOENT and EACCES, as bash prints them
        ("run.sh: 行 12: ./data/prepare.sh: 没有那个文件或目录", "file_not_found"),
        ("run.sh: 行 7: ./scripts/launch.sh: 权限不够", "permission_error"),
    ],
)
def test_shell_errors_in_a_chinese_locale(text: str, reason: str) -> None:
    assert _reason(text) == reason


def test_sacreds_shortened_traceback_is_a_traceback() -> None:
    """mboudiaf/TIM#4 (case 493): Sacred drops its own frames and says so in the header."""
    text = """
ERROR - FSL training - Failed after 0:04:19!
Traceback (most recent calls WITHOUT Sacred internals):
  File "/home/user/code/TIM-master/src/main.py", line 118, in main
    if (epoch) % trainer.meta_val_interval == 0:
AttributeError: 'Trainer' object has no attribute 'meta_val_interval'
"""
    assert _reason(text) == "script_error"


_GETATTR = """
Traceback (most recent call last):
  File "/home/user/PixArt-sigma/train_scripts/train.py", line 196, in train
    f"epoch_eta:{eta_epoch}, s:({model.module.h}, {model.module.w}), "
  File "/home/user/.local/lib/python3.9/site-packages/torch/nn/modules/module.py", line 1688, in __getattr__
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
AttributeError: 'PixArtMS' object has no attribute 'module'
"""


def test_an_attributeerror_from_torchs_attribute_lookup_is_the_callers() -> None:
    """PixArt-alpha/PixArt-sigma#36 (case 494): `model.module` without DDP; torch's Module.__getattr__
    raises on the script's behalf, so the frame before it decides. The same error from a framework frame
    that is not a lookup hook stays the framework's."""
    assert _reason(_GETATTR) == "script_error"
    from_framework = _GETATTR.replace(
        "/home/user/PixArt-sigma/train_scripts/train.py", "/usr/lib/python3.9/site-packages/diffusers/pipeline.py"
    )
    assert _reason(from_framework) == "framework_error"


def test_autograds_inplace_check_is_torchs_whatever_frames_a_notebook_shows() -> None:
    """JDAI-CV/LIO#9 (case 498): IPython shows only the cell's `loss.backward()`; the message says
    autograd raised it."""
    text = """
RuntimeError                              Traceback (most recent call last)
<ipython-input-7-3b1f0a2c9d41> in <module>
---> 22         loss.backward()

RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: [torch.cuda.FloatTensor [10, 49]], which is output 0 of SubBackward0, is at version 1; expected version 0 instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with torch.autograd.set_detect_anomaly(True).
"""
    assert _reason(text, "notebook.log") == "framework_error"


def test_nccls_own_connect_failure_by_strerror_is_the_network() -> None:
    """pytorch/pytorch#38702 (case 506): NCCL's bootstrap cannot reach a peer ('Connect to ... failed :
    Connection refused'); the 'unhandled system error' that follows is its consequence."""
    text = """
tj1-asr-train-v100-13:941227:943077 [0] NCCL INFO Call to connect returned Connection refused, retrying
tj1-asr-train-v100-13:941227:943077 [0] include/socket.h:390 NCCL WARN Connect to 10.38.10.112<21724> failed : Connection refused
tj1-asr-train-v100-13:941227:943077 [0] NCCL INFO bootstrap.cc:95 -> 2
RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:410, unhandled system error, NCCL version 2.4.8
"""
    assert _reason(text) == "network_error"


def test_a_dataloader_that_ran_out_of_file_descriptors_is_the_dataloader() -> None:
    """openclimatefix-archives/predict_pv_yield#110 (case 512): the RuntimeError is raised inside torch's
    DataLoader, but its message names the workers: the message first, the frame second."""
    text = """
Epoch 3:  41%|████      | 2053/5000 [22:58<32:58,  1.49it/s, loss=0.0409, v_num=1121]
Traceback (most recent call last):
  File "/opt/conda/lib/python3.9/site-packages/torch/utils/data/dataloader.py", line 1003, in _try_get_data
    raise RuntimeError(
RuntimeError: Too many open files. Communication with the workers is no longer possible. Please increase the limit using `ulimit -n` in the shell or change the sharing strategy by calling `torch.multiprocessing.set_sharing_strategy('file_system')` at the beginning of your code
"""
    assert _reason(text) == "dataloader_error"


_WATCHDOG_FRAMES = """
[2025-01-21 17:40:12,004] INFO: running validation on 2 GPUs
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1554e8b12f86 in /opt/torch/lib/libc10.so)
frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in /opt/torch/lib/libtorch_cuda.so)
frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x1554e9e16333 in /opt/torch/lib/libtorch_cuda.so)
frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x1554e9e1871c in /opt/torch/lib/libtorch_cuda.so)

Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 (most recent call first):
"""


def test_a_watchdog_timeout_known_only_by_its_frames() -> None:
    """jpata/particleflow#390 (case 522): the excerpt keeps the watchdog's C++ frames but not its
    sentence; `WorkNCCL::checkTimeout` is the frame that throws a timeout. It stays a cascade: a CUDA
    fault the watchdog carries (its frames are `finishedGPUExecution`, not `checkTimeout`) still wins."""
    assert _reason(_WATCHDOG_FRAMES) == "nccl_timeout"
    with_fault = _WATCHDOG_FRAMES.replace(
        "frame #0:",
        "[rank1]:[E107 10:50:18.780482185 ProcessGroupNCCL.cpp:1504] [PG 0 (default_pg) Rank 1] Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was encountered\nframe #0:",
    )
    assert _reason(with_fault) == "cuda_error"


_NNUNET = """
2024-04-12 14:36:17.012179: This split has 640 training and 160 validation cases.
2024-04-12 14:36:17.071842: Unable to plot network architecture:
2024-04-12 14:36:17.072695: No module named 'hiddenlayer'
2024-04-12 14:36:17.085947: Epoch 0
2024-04-12 14:36:17.086544: Current learning rate: 0.01
using pin_memory on device 0
Exception in background worker 11:
 No data left in file
Traceback (most recent call last):
  File "/home/user/.conda/envs/nnUNet/lib/python3.11/site-packages/batchgenerators/dataloading/nondet_multi_threaded_augmenter.py", line 53, in producer
    item = next(data_loader)
"""


def test_a_logged_missing_optional_module_is_survived_and_batchgenerators_workers_are_the_dataloader() -> None:
    """MIC-DKFZ/nnUNet#2086 (case 548): nnU-Net logs "No module named 'hiddenlayer'" (no exception name)
    and trains on; its batchgenerators background worker then fails. The bare message alone, or as a
    traceback's last line, is still an import error."""
    assert _reason(_NNUNET) == "dataloader_error"
    assert _reason("2024-04-12 14:36:17.072695: No module named 'hiddenlayer'") == "import_error"
    stripped = """
Traceback (most recent call last):
  File "train.py", line 3, in <module>
    import hiddenlayer
No module named 'hiddenlayer'
"""
    assert _reason(stripped) == "import_error"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # deepspeedai/DeepSpeedExamples#321 (case 554): Rust's allocator, two ranks interleaved on a line
        ("memory allocation of memory allocation of 20971522097152 bytes failed\n bytes failed", "host_oom"),
        # kohya-ss/sd-scripts#1411 (case 565): Windows' access violation, 0xC0000005, as an exit status
        (
            "subprocess.CalledProcessError: Command '['C:\\\\Python3_10_11\\\\python.exe', "
            "'D:/kohya_ss/sd-scripts/sdxl_train_network.py']' returned non-zero exit status 3221225477.",
            "framework_error",
        ),
        # facebookresearch/Detectron#359 (case 564): glog's failure handler
        (
            '*** Aborted at 1525421992 (unix time) try "date -d @1525421992" if you are using GNU date ***\n'
            "PC: @     0x7f81c7321ff1 (unknown)\n"
            "*** SIGSEGV (@0x19) received by PID 11091 (TID 0x7f813c844700) from PID 25; stack trace: ***\n"
            "    @     0x7f81be71cdef npy_free_cache",
            "framework_error",
        ),
        # zhiyuanyou/SAFECount#16 (case 563): dash names the script, not itself
        ("train.sh: 1: srun: not found", "file_not_found"),
        # c3nl-neuraldynamics/c3nl_cluster#24 (case 571): slurm holds a job whose launch failed on its node
        (
            "            108321   compute  gp_fit1 spopescu PD       0:00      1 (launch failed requeued held)",
            "node_failure",
        ),
        # FNNDSC/pman#200 (case 572): the scheduler refuses the request at submission
        (
            "sbatch: error: CPU count per node can not be satisfied\n"
            "sbatch: error: Batch job submission failed: Requested node configuration is not available",
            "argument_error",
        ),
    ],
)
def test_exits_and_refusals_in_other_words(text: str, reason: str) -> None:
    """Allocator failures, segfaults and scheduler answers in wordings the first rules did not know."""
    assert _reason(text) == reason


_PEERS = """
  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/utils.py", line 265, in _verify_param_shape_across_processes
    return dist._verify_params_across_processes(process_group, tensors, logger)
RuntimeError: CUDA error: peer mapping resources exhausted
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""


def test_cuda_errors_that_name_the_launch_or_the_build_are_not_faults() -> None:
    """hiyouga/LlamaFactory#1213 (case 560): ten processes on one machine exhaust CUDA's eight peers, a
    launch that asked too much (as `invalid device ordinal`). bmaltais/kohya_ss#192 (case 566): a
    bitsandbytes binary without the GPU's architecture. davisking/dlib#2905 (case 575): dlib's own
    wording of a CUDA error stays a CUDA fault."""
    assert _reason(_PEERS) == "argument_error"
    no_image = (
        "Error no kernel image is available for execution on the device at line 167 in file "
        "D:\\ai\\tool\\bitsandbytes\\csrc\\ops.cu"
    )
    assert _reason(no_image) == "import_error"
    assert (
        _reason("RuntimeError: CUDA error: no kernel image is available for execution on the device") == "import_error"
    )
    dlib = (
        "terminate called after throwing an instance of 'dlib::cuda_error'\n"
        "  what():  Error while calling cudaOccupancyMaxPotentialBlockSize(&num_blocks,&num_threads,K) in file "
        "dlib/dlib/cuda/cuda_utils.h:186. code: 98, reason: invalid device function"
    )
    assert _reason(dlib) == "cuda_error"


_VLLM_ENGINE = """
ERROR 04-21 06:02:08 [engine.py:161] AssertionError()
ERROR 04-21 06:02:08 [engine.py:161] Traceback (most recent call last):
ERROR 04-21 06:02:08 [engine.py:161]   File "/usr/local/lib/python3.10/dist-packages/vllm/engine/multiprocessing/engine.py", line 222, in run_engine_loop
ERROR 04-21 06:02:08 [engine.py:161]     request_outputs = self.engine_step()
ERROR 04-21 06:02:08 [engine.py:161] AssertionError
CRITICAL 04-21 06:02:09 [launcher.py:116] MQLLMEngine is already dead, terminating server process
"""

_SGLANG_SOURCE = """
[2026-05-09 03:17:06 DP0 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/constrained/base_grammar_backend.py", line 188, in _single_token_id
    raise ValueError(
ValueError: think_end_token '</think>' must encode to exactly one token for constrained reasoning.
"""


def test_tracebacks_behind_vllm_log_prefixes_and_in_framework_source_checkouts() -> None:
    """QwenLM/Qwen2.5-Omni#226 (case 558): vLLM's "LEVEL MM-DD HH:MM:SS [file.py:N]" prefix hid the
    traceback. sgl-project/sglang#24843 (case 570): sglang run from its source tree, not site-packages,
    is still the framework's frame."""
    assert normalize("ERROR 04-21 06:02:08 [engine.py:161] AssertionError")[0] == "AssertionError"
    assert normalize("ERROR 11-05 12:03:00 client.py:250] RuntimeError: Engine loop has died")[0] == (
        "RuntimeError: Engine loop has died"
    )
    assert _reason(_VLLM_ENGINE) == "framework_error"
    assert _reason(_SGLANG_SOURCE) == "framework_error"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # lululxvi/deepxde#63 (case 578): TensorFlow restores a checkpoint that lacks a variable
        (
            "NotFoundError: Key beta1_power not found in checkpoint\n\t [[{{node save/RestoreV2}}]]",
            "checkpoint_load_error",
        ),
        # zylo117/Yet-Another-EfficientDet-Pytorch#101 (case 579): a checkpoint cut short by Ctrl+C
        (
            '  File "/opt/conda/lib/python3.7/site-packages/torch/serialization.py", line 709, in _legacy_load\n'
            "    deserialized_objects[key]._set_from_file(f, offset, f_should_read_directly)\n"
            "RuntimeError: unexpected EOF, expected 8 more bytes. The file might be corrupted.",
            "checkpoint_load_error",
        ),
        # kubeflow/pipelines#686 (case 580): a pipeline step's exit code 139 is 128 + SIGSEGV
        (
            " └-✖ train                keras-train-pipeline-r8kx2-3011474961  1m       failed with exit code 139",
            "framework_error",
        ),
        # kubeflow/trainer#1158 (case 581): TensorFlow's fatal check on a kernel launch out of memory
        (
            "2020-05-04 08:12:44.901772: F ./tensorflow/core/kernels/random_op_gpu.h:232] Non-OK-status: "
            "GpuLaunchKernel(FillPhiloxRandomKernelLaunch<Distribution>, num_blocks, block_size, 0, d.stream(), "
            "gen, data, size, dist) status: Internal: out of memory",
            "gpu_oom",
        ),
        # naruya/VaxNeRF#1 (case 587) and kingoflolz/mesh-transformer-jax#202 (case 588): builds that do not fit
        (
            "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CustomCall failed: jaxlib/cuda_prng_kernels.cc:30: "
            "operation cudaGetLastError() failed: the provided PTX was compiled with an unsupported toolchain.",
            "import_error",
        ),
        (
            "2022-02-23 17:35:25.749201: F external/org_tensorflow/tensorflow/core/tpu/tpu_library_init_fns.inc:104] "
            "TpuEmbeddingEngine_WriteParameters not available in this library.",
            "import_error",
        ),
    ],
)
def test_second_batch_wordings(text: str, reason: str) -> None:
    """The classes the second corpus19d batch (cases 578-589) missed at first sight."""
    assert _reason(text) == reason


_NCCL_BUS_ERROR = """
Loading extension module fused_mix_prec_layer_norm_cuda...
[610867610e4b:2498 :0:2599] Caught signal 7 (Bus error: nonexistent physical address)

 0 0x0000000000014420 __funlockfile()  ???:0
 4 0x0000000000050853 ncclGetUniqueId()  ???:0
 5 0x00000000000417b4 ???()  /lib/x86_64-linux-gnu/libnccl.so.2:0

Fatal Python error: Bus error
"""


def test_a_bus_error_in_nccl_frames_is_nccl_and_edac_still_blames_the_node() -> None:
    """bigscience-workshop/Megatron-DeepSpeed#341 (case 585): a process's bus error whose backtrace is
    NCCL's own setup (shared memory in a container) is NCCL's. With the node's EDAC uncorrectable error
    in its kernel log (case 036) it is the node's."""
    assert _reason(_NCCL_BUS_ERROR) == "nccl_error"
    kern = "Mar  3 10:11:02 gpu-j03 kernel: EDAC MC0: 1 UE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0"
    both = diagnose_rules([_src("train.log", _NCCL_BUS_ERROR), _src("kern.log", kern)])
    assert both.reason == "node_failure"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # modelscope/ms-swift#4219 (case 596): the kernel's own assertion, before torch's device-side assert
        (
            "../aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
            "thread: [31,0,0] Assertion `t >= 0 && t < n_classes` failed.",
            "framework_error",
        ),
        # modelscope/ms-swift#1984 (case 597) and ray-project/ray#30063 (case 612): tensors the script
        # placed on different devices, raised deep in torch
        (
            '  File "/home/yj/.venv/lib/python3.10/site-packages/torch/nn/functional.py", line 3104, in cross_entropy\n'
            "    return torch._C._nn.cross_entropy_loss(input, target, weight)\n"
            "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:3 and "
            "cuda:0! (when checking argument for argument target in method wrapper_CUDA_nll_loss_forward)",
            "script_error",
        ),
        (
            "(BackendExecutor pid=5631) RuntimeError: Expected tensor for 'out' to have the same device as tensor for "
            "argument #2 'mat1'; but device 1 does not equal 3 (while checking arguments for addmm)",
            "script_error",
        ),
        # PaddlePaddle/Paddle#10876 (case 605): a parameter server that does not answer
        (
            "E0523 18:38:30.050364  1005 grpc_client.cc:236] proc param error:name:[fc_0.b_0] "
            "ep:[10.255.92.12:30002] grpc error:Deadline Exceeded",
            "network_error",
        ),
        # open-mmlab/mmsegmentation#308 (case 606) and facebookresearch/dlrm#4 (case 610): the shell's kill
        # report glued to the end of a progress line, or written over the start of one
        (
            "[>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>         ] 3217/3849, 4.0 task/s, elapsed: 799s, ETA:   157s已杀死",
            "host_oom",
        ),
        ("Total number of batches 263115\nKilledg in train batch: 127687 / 263115", "host_oom"),
        # huggingface/trl#397 (case 611): NCCL 2.14 reports two ranks on one GPU as an internal error
        (
            "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, internal error, NCCL version 2.14.3\n"
            "ncclInternalError: Internal check failed.\n"
            "Last error:\n"
            "Duplicate GPU detected : rank 7 and rank 0 both on CUDA device f5000",
            "framework_error",
        ),
        # open-mmlab/mmdetection3d#603 (case 616): tools/train.py run where dist_train.sh was meant
        (
            '  File "/home/erkang/miniconda3/envs/mmlab/lib/python3.7/site-packages/mmcv/parallel/data_parallel.py", line 67, in train_step\n'
            "    assert len(self.device_ids) == 1, \\\n"
            "AssertionError: MMDataParallel only supports single GPU training, if you need to train with multiple GPUs, "
            "please use MMDistributedDataParallel instead.",
            "argument_error",
        ),
    ],
)
def test_corpus19e_wordings(text: str, reason: str) -> None:
    """The classes the corpus19e batch (cases 590-617) missed at first sight."""
    assert _reason(text) == reason


_XTTS_TWO_GPUS = """
>> DVAE weights restored from: E:\\xtts\\finetune_models\\dvae.pth
Traceback (most recent call last):                                                                           | 0.00/7.75M [00:00<?, ?iB/s]
  File "E:\\xtts\\venv\\lib\\site-packages\\trainer\\trainer_utils.py", line 100, in setup_torch_training_env
    raise RuntimeError(
RuntimeError:  [!] 2 active GPUs. Define the target GPU by `CUDA_VISIBLE_DEVICES`. For multi-gpu training use `TTS/bin/distribute.py`.
"""


def test_a_traceback_header_with_a_bars_residue_after_it_is_still_read() -> None:
    """daswer123/xtts-finetune-webui#28 (case 613): a download bar drew its residue on the traceback's
    header line; the header is not taken for a bar's description, and the trainer's refusal of two GPUs
    is the launch's (argument_error). With another message the traceback is still read (framework_error)."""
    assert _reason(_XTTS_TWO_GPUS) == "argument_error"
    other = _XTTS_TWO_GPUS.replace("[!] 2 active GPUs. Define the target GPU by", "something odd happened with")
    assert _reason(other) == "framework_error"


# ---------------------------------------------------------------- corpus20, cases 626-665


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # xiong-zhitong/DOFA-pytorch#20 (case 627): Lightning refuses GPUs the process cannot see
        (
            "lightning.fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1]\n But your machine only has: [0]",
            "argument_error",
        ),
        # ... and none at all: a CPU-only torch
        (
            "pytorch_lightning.utilities.exceptions.MisconfigurationException: You requested GPUs: [0]\n But your machine only has: []",
            "import_error",
        ),
        (
            "lightning_fabric.utilities.exceptions.MisconfigurationException: `CUDAAccelerator` can not run on your system since the accelerator is not available. The following accelerator(s) is available and can be passed into `accelerator` argument of `Trainer`: ['cpu'].",
            "import_error",
        ),
        # tianweiy/CenterPoint#308 (case 633): an optional import that failed, then the name used
        ("NameError: name 'apex' is not defined.\nNo apex\nNo tensorflow", "import_error"),
        # the same exception for a name that is no package stays the script's
        ("NameError: name 'optimzer' is not defined", "script_error"),
        # meta-pytorch/torchrec#1008 (case 636): an mpirun rank's tail, frames without their header
        (
            '[1,7]<stderr>:  File "/opt/conda/envs/ptca/lib/python3.8/site-packages/torchrec/distributed/model_parallel.py", line 276, in forward\n'
            "[1,7]<stderr>:    return self._dmp_wrapped_module(*args, **kwargs)\n"
            "[1,7]<stderr>:RuntimeError: Storage size calculation overflowed with sizes=[8410156404468110876]",
            "framework_error",
        ),
        # ... the same tail ending in the script's own frame is the script's
        (
            '[1,7]<stderr>:  File "apps/ranking/train.py", line 303, in _step\n'
            "[1,7]<stderr>:    loss = compute(batch)\n"
            "[1,7]<stderr>:KeyError: 'labels'",
            "script_error",
        ),
        # alibaba/TorchEasyRec#360 (case 637): an assertion in a state-dict hook, while loading
        (
            '[rank1]:   File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 2597, in load\n'
            "[rank1]:     out = hook(module, incompatible_keys)\n"
            '[rank1]:   File "/opt/conda/lib/python3.11/site-packages/torchrec/modules/mc_modules.py", line 231, in _load_state_dict_post_hook\n'
            "[rank1]:     module.validate_state()\n"
            '[rank1]:   File "/opt/conda/lib/python3.11/site-packages/torchrec/modules/mc_modules.py", line 1398, in validate_state\n'
            "[rank1]:     start in self._output_segments_tensor\n"
            "[rank1]: AssertionError: shard within range [189401, 378801] cannot be built out of segements tensor([     0,  94701, 1894",
            "checkpoint_load_error",
        ),
        # Lightning-AI/litgpt#640 and deepspeedai/Megatron-DeepSpeed#196 (cases 647, 665): an assertion
        # alone, no frame: the type decides, as the taxonomy's evidence (framework)
        (
            "AssertionError: The `grad_fn` is needed to access the `AccumulateGrad` and register the post-backward hook",
            "framework_error",
        ),
        ("AssertionError: param 730 already assigned swap buffer id 45", "framework_error"),
        ("ValueError: lengths array has incorrect size", "script_error"),
        # OpenNMT/OpenNMT-py#662 (case 654), and torch's later wordings: torch built without a backend
        (
            "RuntimeError: the distributed NCCL backend is not available; try to recompile the THD package with CUDA and NCCL 2+ support at /opt/conda/conda-bld/pytorch_1533672544752/work/torch/lib/THD/process_group/General.cpp:17",
            "import_error",
        ),
        ("RuntimeError: Distributed package doesn't have NCCL built in", "import_error"),
        ("AssertionError: Torch not compiled with CUDA enabled", "import_error"),
        # aigc-apps/VideoX-Fun#109 (case 649): the message printed before a traceback that never ends
        (
            "RuntimeError: Given groups=1, weight of size [1920, 33, 2, 2], expected input[2, 16, 80, 80] to have 33 channels, but got 16 channels instead\n"
            "Traceback (most recent call last):\n"
            '  File "/code/CogVideoX-Fun/scripts/train.py", line 1559, in main\n'
            "    noise_pred = transformer3d(\n"
            '  File "/envs/lib/python3.10/site-packages/torch/nn/parallel/distributed.py", line 1359, in _run_ddp_forward',
            "script_error",
        ),
        # Lightning-AI/lit-llama#301 (case 646): the data iterator ran dry at the training loop
        (
            ' File "/vepfs/lit-llama/pretrain/redpajama.py", line 144, in main\n'
            "    for iter_num, train_data in enumerate(train_dataloader):\n"
            "RuntimeError: generator raised StopIteration",
            "dataloader_error",
        ),
        # hpcaitech/Open-Sora#446 (case 640): the connection reset raised by the loop's iterator (the
        # DataLoader's workers pass tensors over sockets), not by a peer node
        (
            '[rank1]:   File "/opt/ml/code/Open-Sora/scripts/train.py", line 235, in main\n'
            "[rank1]:     for step, batch in pbar:\n"
            "[rank1]: ConnectionResetError: [Errno 104] Connection reset by peer",
            "dataloader_error",
        ),
        # ... and where the frames show the DataLoader's file-descriptor passing
        (
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.10/multiprocessing/resource_sharer.py", line 86, in get_connection\n'
            "    c = Client(address, authkey=process.current_process().authkey)\n"
            "ConnectionRefusedError: [Errno 111] Connection refused",
            "dataloader_error",
        ),
        # a connection reset in a download, outside any loader, is still the network's
        (
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.10/site-packages/urllib3/connectionpool.py", line 703, in urlopen\n'
            "    httplib_response = self._make_request(\n"
            "ConnectionResetError: [Errno 104] Connection reset by peer",
            "network_error",
        ),
        # a logged exception line tagged as a warning is a warning: the later error is the answer
        (
            "WARNING: ValueError: could not parse the optional config, using defaults\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "gpu_oom",
        ),
    ],
)
def test_corpus20_exception_lines_without_a_traceback(text: str, reason: str) -> None:
    """Exception lines met alone (a report's last line, a rank's tail whose header was cut): their message
    first, then the frames above them when there are any, else their type, as the taxonomy's evidence."""
    assert _reason(text) == reason


def test_a_ray_actor_death_is_a_consequence_of_the_node_marked_dead() -> None:
    """ray-project/ray#44680 (case 117): read alone now, RayActorError only reports the death."""
    text = (
        "WARNING worker.py:2037 -- The node with node id: 4c4427b6 and address: 10.4.3.95 and node name: 10.4.3.95 "
        "has been marked dead because the detector has missed too many heartbeats\n"
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task."
    )
    assert _reason(text) == "node_failure"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # bme-chatbots/dialogue-generation#8 (case 632): c10's internal assertion under terminate
        (
            "terminate called after throwing an instance of 'c10::Error'\n"
            "  what():  owning_ptr == NullType::singleton() || owning_ptr->refcount_.load() > 0 INTERNAL ASSERT FAILED at /pytorch/c10/util/intrusive_ptr.h:348, please report a bug to PyTorch. intrusive_ptr: Can only intrusive_ptr::reclaim() owning pointers that were created using intrusive_ptr::release().\n"
            "frame #2: THStorage_free + 0x17 (0x7f018e31c1d7 in /home/ubuntu/venv/lib/python3.6/site-packages/torch/lib/libtorch.so)",
            "framework_error",
        ),
        # mindspore-lab/mindyolo#242 (case 641): Open MPI's signal handler, and mpirun's summary
        (
            "2023-11-03 17:50:49,478 [INFO] Epoch 2/100, Step 600/924, step time: 305.22 ms\n"
            "[m2301007135:374576] *** Process received signal ***\n"
            "[m2301007135:374576] Signal: Segmentation fault (11)\n"
            "[m2301007135:374576] Signal code: Address not mapped (1)\n"
            "[m2301007135:374576] [ 1] /lib/x86_64-linux-gnu/libc.so.6(+0x18b8f5)[0x7fcd5a6858f5]",
            "framework_error",
        ),
        (
            "mpirun noticed that process rank 3 with PID 0 on node gpu-n07 exited on signal 11 (Segmentation fault).",
            "framework_error",
        ),
        # NVIDIA-NeMo#8085 (case 643): glibc's heap check, then the shell's abort
        (
            "Epoch 0:   0%|          | 0/152 [00:00<?, ?it/s]\ndouble free or corruption (out)\nAborted (core dumped)",
            "framework_error",
        ),
        ("free(): invalid pointer\nAborted (core dumped)", "framework_error"),
        # Oneflow-Inc/oneflow#6746 (case 642): glog's fatal check in the framework's op code
        (
            "F1122 13:50:47.079073 63928 user_op.cpp:299] Check failed: it != arg2tensor_desc_.end() Cannot find input_arg_name : out input_arg_index : 0\n"
            "*** Check failure stack trace: ***",
            "framework_error",
        ),
        # ... but a check whose message names the cause is left to the cause (Paddle#6136, case 604)
        (
            "F1201 10:22:42.120411 18811 LightNetwork.cpp:397] Check failed: error >= 0 ERROR connecting to 10.87.101.33: Connection refused [111]",
            "network_error",
        ),
        # deepspeedai/DeepSpeed#4888 (case 664): glibc's assert() in DeepSpeed's async-IO op
        (
            "python: /opt/conda/lib/python3.10/site-packages/deepspeed/ops/csrc/aio/common/deepspeed_aio_common.cpp:125: int _do_io_complete(long long int, long long int, std::unique_ptr<aio_context>&, std::vector<std::chrono::duration<double> >&): Assertion `n_completes >= min_completes' failed.\n"
            "[2023-12-31 02:55:09,375] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 302",
            "framework_error",
        ),
    ],
)
def test_corpus20_native_aborts_in_their_own_words(text: str, reason: str) -> None:
    """A native library that stopped itself, as c10, glibc, glog or Open MPI's handler says it."""
    assert _reason(text) == reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # bytedance/lightseq#143 (case 626): the cuBLAS sample code's wording, status 13 and 14
        (
            "!!!! kernel execution error. (m: 256, n: 256, k: 64, error: 13)\n!!!! kernel execution error. (m: 768, n: 1024, k: 768, error: 14)",
            "cuda_error",
        ),
        # NVIDIA/TensorRT-LLM#1839 (case 644): TensorRT-LLM's check of a CUDA runtime call
        (
            "terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'\n"
            "  what():  [TensorRT-LLM][ERROR] CUDA runtime error in cudaMemGetInfo(&free, &total): unknown error (/home/jenkins/agent/workspace/LLM/release-0.10/L0_PostMerge/tensorrt_llm/cpp/tensorrt_llm/common/cudaUtils.h:319)",
            "cuda_error",
        ),
        # the same words for memory are the GPU's memory, in TensorRT-LLM's and old torch's wording
        (
            "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory (/src/tensorrt_llm/runtime/tllmBuffers.h:118)",
            "gpu_oom",
        ),
        (
            "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
            "gpu_oom",
        ),
        # old torch's THC check
        (
            "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCGeneral.cpp line=405 error=11 : invalid argument",
            "cuda_error",
        ),
        # and its device-side assert and bad ordinal still go to their own rules
        (
            "RuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/generic/THCTensorCopy.cpp:20",
            "framework_error",
        ),
        (
            "RuntimeError: cuda runtime error (10) : invalid device ordinal at torch/csrc/cuda/Module.cpp:34",
            "argument_error",
        ),
    ],
)
def test_corpus20_cuda_failures_in_a_librarys_own_words(text: str, reason: str) -> None:
    assert _reason(text) == reason


_TCPSTORE_IN_USE = """
Use GPU: 0 for training
Traceback (most recent call last):
  File "train.py", line 120, in train
    dist.init_process_group(backend='nccl', init_method='env://')
  File "/home/u/anaconda3/envs/facezoo/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line 179, in _env_rendezvous_handler
    store = TCPStore(master_addr, master_port, world_size, start_daemon, timeout)
RuntimeError: Address already in use
Traceback (most recent call last):
  File "/home/u/anaconda3/envs/facezoo/lib/python3.8/site-packages/torch/distributed/launch.py", line 256, in main
    raise subprocess.CalledProcessError(returncode=process.returncode,
subprocess.CalledProcessError: Command '['/home/u/anaconda3/envs/facezoo/bin/python', '-u', 'train.py', '--local_rank=0']' returned non-zero exit status 1.
"""


@pytest.mark.parametrize(
    "text",
    [
        # Meituan-AutoML/MobileVLM#60 (case 630): TCPStore's own wording
        " RuntimeError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:9901 (errno: 98 - Address already in use). The server socket has failed to bind to ?UNKNOWN? (errno: 98 - Address already in use).",
        # JDAI-CV/FaceX-Zoo#122 (case 660): older torch's bare message, inside torch's frames
        _TCPSTORE_IN_USE,
        # Python's own, for a server's port
        "OSError: [Errno 98] Address already in use",
    ],
)
def test_corpus20_a_port_already_in_use_is_the_rendezvous_not_the_framework(text: str) -> None:
    """The rendezvous store cannot listen: its port is held (a run that did not exit, another job on the
    node). The taxonomy files rendezvous failures under network_error (restart), not the framework."""
    assert _reason(text) == "network_error"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # facebookresearch/maskrcnn-benchmark#711 (case 634): amp.scale_loss without amp.initialize;
        # the last frame is apex's, the usage the caller's
        (
            "Traceback (most recent call last):\n"
            '  File "/home/u/maskrcnn-benchmark/maskrcnn_benchmark/engine/trainer.py", line 79, in do_train\n'
            "    with amp.scale_loss(losses, optimizer) as scaled_losses:\n"
            '  File "/home/u/anaconda3/envs/env/lib/python3.7/site-packages/apex-0.1-py3.7-linux-x86_64.egg/apex/amp/handle.py", line 78, in scale_loss\n'
            "    if not _amp_state.opt_properties.enabled:\n"
            "AttributeError: 'AmpState' object has no attribute 'opt_properties'",
            "script_error",
        ),
        (
            "RuntimeError: Incoming model is an instance of torch.nn.parallel.DistributedDataParallel. Parallel wrappers should only be applied to the model(s) AFTER the model(s) have been returned from amp.initialize.",
            "script_error",
        ),
        # OpenNMT/OpenNMT-py#34 (case 652): DataParallel's parallel_apply re-raises a replica's exception
        # ('raise output'): the frame says nothing of where it came from, the type decides
        (
            "Traceback (most recent call last):\n"
            '  File "train.py", line 198, in trainEpoch\n'
            "    outputs = model(batch)\n"
            '  File "/usr/local/lib/python2.7/dist-packages/torch/nn/parallel/parallel_apply.py", line 45, in parallel_apply\n'
            "    raise output\n"
            "ValueError: lengths array has incorrect size",
            "script_error",
        ),
        # OpenNMT/OpenNMT-py#125 (case 653): THC's words for a device mismatch, re-raised the same way
        (
            "Traceback (most recent call last):\n"
            '  File "train.py", line 254, in trainEpoch\n'
            "    dec_state)\n"
            '  File "/data/anaconda2/lib/python2.7/site-packages/torch/nn/parallel/parallel_apply.py", line 46, in parallel_apply\n'
            "    raise output\n"
            "RuntimeError: arguments are located on different GPUs at /b/wheel/pytorch-src/torch/lib/THC/generated/../generic/THCTensorMathPointwise.cu:214",
            "script_error",
        ),
        # torch's other words for it
        (
            "RuntimeError: Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same",
            "script_error",
        ),
        (
            "RuntimeError: Expected object of device type cuda but got device type cpu for argument #1 'self' in call to _th_addmm",
            "script_error",
        ),
        (
            "RuntimeError: Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments for addmm)",
            "script_error",
        ),
        # oobabooga/textgen#7016 (case 655): a device mismatch in transformers' loss code, then the UI's
        # own success lines; the same evidence as case 597, the same answer
        (
            '/envs/textgen/lib/python3.11/site-packages/transformers/loss/loss_utils.py", line 29, in fixed_cross_entropy\n'
            "    loss = loss / num_items_in_batch\n"
            "           ~~~~~^~~~~~~~~~~~~~~~~~~~\n"
            "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!\n"
            "23:30:37-256709 INFO     Training complete, saving\n"
            "23:30:39-950875 INFO     Training complete!",
            "script_error",
        ),
    ],
)
def test_corpus20_frames_and_wordings_that_point_elsewhere(text: str, reason: str) -> None:
    assert _reason(text) == reason


def test_an_exception_line_alone_is_weak_evidence() -> None:
    """An exception line with no traceback, known only by its type, is the answer when nothing else is;
    a launcher's account of the exit outweighs it, and training that went on after it makes it no
    evidence at all (a handler printed it)."""
    line = "ValueError: bad value in the optional config, ignoring"
    assert _reason(line) == "script_error"
    logged = line + "\niteration 5 | loss 1.0 | lr 0.1"
    assert _reason(logged) == "unknown"
    assert diagnose_rules([_src("t.log", line, signal=15)]).reason == "preempted"
    assert diagnose_rules([_src("t.log", line, exit_code=137)]).reason == "host_oom"
    assert _reason(line + "\nsrun: error: gpu-n17: task 3: Killed") == "host_oom"


_REPLICA_RERAISE = """
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    out = model(x)
  File "/usr/lib/python3.10/site-packages/torch/nn/parallel/parallel_apply.py", line 89, in parallel_apply
    output.reraise()
  File "/usr/lib/python3.10/site-packages/torch/_utils.py", line 644, in reraise
    raise exception
RuntimeError: Caught RuntimeError in replica 0 on device 0.
Original Traceback (most recent call last):
  File "/usr/lib/python3.10/site-packages/torch/nn/parallel/parallel_apply.py", line 64, in _worker
    output = module(*input, **kwargs)
  File "/work/model.py", line 40, in forward
    h = self.proj(x).view(b, -1)
RuntimeError: shape '[8, -1]' is invalid for input of size 7
"""


def test_dataparallels_reraise_points_to_the_original_traceback() -> None:
    """Today's DataParallel re-raises a replica's exception with the original traceback after it: the
    original's frames decide (the model's own forward: the script's; a library's: the framework's)."""
    assert _reason(_REPLICA_RERAISE) == "script_error"
    in_library = _REPLICA_RERAISE.replace("/work/model.py", "/usr/lib/python3.10/site-packages/timm/models/vit.py")
    assert _reason(in_library) == "framework_error"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # an uncaught C++ exception whose what() no rule knows: a native abort, weakly
        (
            "terminate called after throwing an instance of 'c10::Error'\n  what():  unexpected refcount",
            "framework_error",
        ),
        ("terminate called without an active exception\nAborted (core dumped)", "framework_error"),
        # its what() line says more when a rule knows it
        ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc", "host_oom"),
        (
            "terminate called after throwing an instance of 'std::runtime_error'\n  what():  NCCL Error 2: unhandled system error",
            "nccl_error",
        ),
    ],
)
def test_the_cxx_runtimes_terminate_is_a_weak_native_abort(text: str, reason: str) -> None:
    assert _reason(text) == reason
