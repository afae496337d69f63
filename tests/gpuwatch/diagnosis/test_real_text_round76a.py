"""Classes of misses from issue 19's rounds seventy-six to seventy-eight (corpus cases 3411-3432: JAX and XLA on NVIDIA
GPUs; 3441-3462: Megatron-LM and NeMo pretraining; 3471-3491: GPU containers and the cluster network), with an older
miss they share a class with. Error messages are verbatim from the public reports named in each test; hosts, paths and
pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # jax-ml/jax#16167 (case 3412): cuDNN older than the one jaxlib was built with, then XLA's consequence
        (
            "2023-05-29 05:39:19.492073: E external/xla/xla/stream_executor/cuda/cuda_dnn.cc:427] Loaded runtime CuDNN library: 8.5.0 but source was compiled with: 8.6.0.  CuDNN library needs to have matching major version and equal or higher minor version.\n"
            "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization failed. Look at the errors above for more details.\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
        # EnzymeAD/Enzyme-JAX#623 (case 3424): XLA's key-value exchange for an NCCL clique
        (
            "E0000 00:00:1743713172.513857  698835 pjrt_stream_executor_client.cc:3072] Execution of replica 0 failed: DEADLINE_EXCEEDED: GetKeyValue() timed out with key: devices=[0,1,2,3,4,5,6,7]; stream=0\n",
            "network_error",
            "connection-reset",
        ),
        # NVIDIA/JAX-Toolbox#183 (case 3431): gdb's backtrace in NCCL's shared memory
        (
            'Thread 42 "python" received signal SIGBUS, Bus error.\n#0 0x00007f6b59544f3b in ncclShmOpen(char*, unsigned long, void**, void**, int, void**) ()\n  from /usr/local/lib/python3.10/dist-packages/jaxlib/xla_extension.so\n',
            "nccl_error",
            "nccl-crash-frames",
        ),
    ],
)
def test_jax_and_xla_on_gpus(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_orbax_restoring_a_checkpoint_in_an_ipython_8_traceback() -> None:
    # google/orbax#648 (case 3428): a 64-device checkpoint restored on 2 devices; IPython's "(...)" between its lines
    text = """
File ~/miniconda3/envs/test/lib/python3.10/site-packages/orbax/checkpoint/type_handlers.py:136, in _deserialize_sharding_from_json_string(sharding_string)
    134   sharding = NamedSharding(
    135       jax.sharding.Mesh(
--> 136           np.array(jax.devices()).reshape(shape), axis_names=axis_names
    137       ),
   (...)
    148   # Cache tip: See Function Attributes https://peps.python.org/pep-0232/.

ValueError: cannot reshape array of size 2 into shape (1,64)
"""
    assert reason_and_rule(text, "restore.log") == ("checkpoint_load_error", "exception-ValueError")


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # OpenBMB/XAgent#273, NVIDIA/nvidia-docker#854, #1447 and NVIDIA/libnvidia-container#150 (cases 3485, 3482, 3481, 3484)
        (
            'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n',
            "import_error",
            "container-gpu-runtime-missing",
        ),
        (
            "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure that the NVIDIA Display Driver is properly installed and present in your system.\n",
            "import_error",
            "container-gpu-runtime-missing",
        ),
        (
            "docker: Error response from daemon: OCI runtime create failed: container_linux.go:370: starting container process caused: process_linux.go:459: container init caused: Running hook #0:: error running hook: exit status 1, stdout: , stderr: nvidia-container-cli: container error: cgroup subsystem devices not found: unknown.\n",
            "import_error",
            "container-gpu-runtime-missing",
        ),
        # saharmor/dalle-playground#104 (case 3479): a driver upgraded without a reboot
        (
            "[ 7386.259769] NVRM: API mismatch: the client has the version 515.48.07, but\n               NVRM: this kernel module has the version 510.73.05.  Please\n",
            "node_failure",
            "driver-library-mismatch",
        ),
        (
            "stderr: nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown\n",
            "node_failure",
            "driver-library-mismatch",
        ),
        # NVIDIA/nvidia-container-toolkit#1227 (case 3478)
        ("(container) $ nvidia-smi -L\nFailed to initialize NVML: Unknown Error\n", "cuda_error", "nvml-init-unknown"),
    ],
)
def test_a_container_without_a_working_gpu_runtime(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # EvolvingLMMs-Lab/open-r1-multimodal#7 (case 3486): NCCL_SOCKET_IFNAME naming an interface the node lacks
        (
            "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2588, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5\n"
            "[rank0]: ncclInternalError: Internal check failed.\n[rank0]: Last error:\n[rank0]: Bootstrap : no socket interface found\n",
            "argument_error",
            "nccl-no-socket-interface",
        ),
        # horovod/horovod#666 (case 3476): NCCL's bootstrap socket closed by its peer
        (
            "seyun:17283:17549 [3] include/socket.h:371 WARN Connection closed by remote peer\n",
            "network_error",
            "connection-reset",
        ),
        # Mellanox/k8s-rdma-shared-dev-plugin#72 and k8s-rdma-sriov-dev-plugin#33 (cases 3488, 3489)
        (
            " GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\nFailed to modify QP 59 to RTR\n Unable to Connect the HCA's through the link\n",
            "network_error",
            "rdma-connect-failed",
        ),
        (
            "rdma_client: start\nrdma_create_ep: No such device\nrdma_client: end -1\n",
            "network_error",
            "rdma-connect-failed",
        ),
        # NVIDIA/TransformerEngine#994 (case 3448): TE's userbuffers in its own words
        (
            "Failed, NCCL error TransformerEngine_official/transformer_engine/pytorch/csrc/userbuffers/userbuffers-host.cpp:223 ''\n",
            "framework_error",
            "te-userbuffers-failed",
        ),
    ],
)
def test_the_network_under_a_job_and_its_frameworks_comm_layers(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_framework_checkouts_named_otherwise_than_their_packages() -> None:
    # alibaba/Pai-Megatron-Patch#167 (case 3452): its checkpoint converter in toolkits/, a view() it asks of torch
    text = """
Traceback (most recent call last):
  File "/workspace/Pai-Megatron-Patch/toolkits/model_checkpoints_convertor/qwen/hf2mcore_1.5_v2.py", line 461, in save_mgmodel
    q_bias = q_bias.view(num_query_groups, -1)
RuntimeError: shape '[16, -1]' is invalid for input of size 2048
"""
    assert reason_of(text) == "framework_error"
    # the same in a project of the user's own is the script's
    assert (
        reason_of(text.replace("Pai-Megatron-Patch/toolkits/model_checkpoints_convertor/qwen", "myproject/tools"))
        == "script_error"
    )
    # PaddleOCR's package in its checkout (case 2208)
    paddle = 'Traceback (most recent call last):\n  File "/home/u/PaddleOCR2.3/ppocr/metrics/distillation_metric.py", line 60, in get_metric\n    assert k in self.metric_dict\nAssertionError\n'
    assert reason_of(paddle) == "framework_error"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # NVIDIA/nccl#342 and jax-ml/jax#26465 (cases 3472, 3413): NCCL's segments on a container's small /dev/shm
        (
            "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\ninclude/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)\n",
            "nccl_error",
            "nccl-shm-full",
        ),
        (
            "E0211 20:37:28.264467    5785 pjrt_stream_executor_client.cc:3045] Execution of replica 0 failed: INTERNAL: NCCL operation ncclGroupEnd() failed: unhandled system error (run with NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated) 'Error while creating shared memory segment /dev/shm/nccl-kXqNYh (size 9637888), error: No space left on device (28)'.\n",
            "nccl_error",
            "nccl-shm-full",
        ),
        # NCCL's shared memory refused for a permission stays the permission's (case 284)
        (
            "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied\nnode08:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-b7948f403864987a-0-3-0 (size 4460544)\n",
            "permission_error",
            "permission",
        ),
        # intel/torch-xpu-ops#1911 (case 3238): an XPU allocation in the Unified Runtime's words
        (
            "RuntimeError: Native API failed. Native API returns: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)\n",
            "gpu_oom",
            "emitter-gpu-oom",
        ),
    ],
)
def test_shared_memory_and_device_memory_in_their_runtimes_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_runner_s_resume_is_checkpoint_loading() -> None:
    # open-mmlab/mmyolo#470 (case 3399)
    text = """
Traceback (most recent call last):
  File "tools/train.py", line 102, in main
    runner.train()
  File "/home/u/anaconda3/envs/pytorch/lib/python3.8/site-packages/mmengine/runner/runner.py", line 1616, in load_or_resume
    self.resume(resume_from)
  File "/home/u/anaconda3/envs/pytorch/lib/python3.8/site-packages/mmengine/runner/runner.py", line 1971, in resume
    self.message_hub.load_state_dict(checkpoint['message_hub'])
KeyError: 'message_hub'
"""
    assert reason_and_rule(text) == ("checkpoint_load_error", "exception-KeyError")


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # facebookresearch/cc_net (older case 2332): a 5xx for a data file's URL is the store the data lives in
        (
            "requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: https://data.commoncrawl.org/crawl-data/CC-MAIN-2023-14/segments/1679296943471.24/wet/CC-MAIN-20230320083513-20230320113513-00114.warc.wet.gz\n",
            "storage_error",
            "object-store-http",
        ),
        # a 5xx from an API the run calls stays the network's (slime's rollout server, case 811)
        (
            "httpx.HTTPStatusError: Server error '503 Service Unavailable' for url 'http://26.104.43.34:3938/generate'\n",
            "network_error",
            "service-unavailable",
        ),
        # GraphVite (older case 2944): glog's check of a CUDA call that ran out of memory
        (
            "Check failed: error == cudaSuccess CUDA error out of memory at /home/conda/feedstock_root/build_artifacts/graphvite_1644810165515/work/include/base/memory.h:131\n",
            "gpu_oom",
            "emitter-gpu-oom",
        ),
    ],
)
def test_older_misses_of_the_same_kinds(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
