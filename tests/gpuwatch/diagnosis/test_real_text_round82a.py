"""Classes of misses from issue 19's rounds eighty-two to eighty-four (corpus cases 3601-3622: PyTorch's compiler and
distributed stack; 3631-3652: accelerators other than NVIDIA's; 3661-3681: elastic and fault-tolerant training). Error
messages are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # triton-lang/triton#3708 (case 3604): Inductor with no working Triton
        (
            "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\nRuntimeError: Cannot find a working triton installation. More information on installing Triton can be found at https://github.com/openai/triton\n",
            "import_error",
            "triton-installation",
        ),
        # MIC-DKFZ/nnUNet#2349 (case 3605): a GPU too old for Triton
        (
            "torch._dynamo.exc.BackendCompilerFailed: backend='compile_fn' raised:\nRuntimeError: Found NVIDIA GeForce GTX 1080 Ti which is too old to be supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability 6.1\n",
            "import_error",
            "triton-installation",
        ),
        # pytorch/torchtitan#55 (case 3603): two Triton packages, two CUDA backends
        (
            "[rank0]:[rank0]: RuntimeError: 2 compatible backends for target (cuda) ([<class 'c.CUDABackend'>, <class 'nvi.CUDABackend'>]). There should only be one.\n",
            "import_error",
            "triton-installation",
        ),
        # triton-lang/triton#1556 (case 3619): a kernel image the container's driver cannot load
        ("RuntimeError: Triton Error [CUDA]: device kernel image is invalid\n", "import_error", "triton-installation"),
        # pytorch/pytorch#97146 (case 3615): Triton's launcher stubs built without Python's headers
        (
            "/tmp/tmpva88bonr/main.c:4:10: fatal error: Python.h: No such file or directory\n    4 | #include <Python.h>\n      |          ^~~~~~~~~~\ncompilation terminated.\n",
            "import_error",
            "triton-installation",
        ),
        # huggingface/optimum-neuron#303 (case 3639): an extension built against a newer numpy C API
        (
            "RuntimeError: Failed compilation with ['neuronx-cc', '--target=trn1', 'compile', '--framework', 'XLA', 'model.hlo.pb']: RuntimeError: module compiled against API version 0xf but this version of numpy is 0xe\n",
            "import_error",
            "dynamic-loader",
        ),
    ],
)
def test_a_compiler_or_extension_that_does_not_fit_the_installation(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_triton_kernel_out_of_shared_memory_is_not_the_gpus_memory() -> None:
    # pytorch/pytorch#175250 (case 3611): FlexAttention's backward kernel asks for more shared memory than an H100 has
    text = (
        "torch._inductor.exc.InductorError: RuntimeError: No valid triton configs. \n"
        "OutOfMemoryError: out of resource: triton_per_fused_add_div_expand_mul_pow_slice_split_sum_view_7\n"
        "Required: 327768 Hardware limit:232448 Reducing block sizes or `num_stages` may help.\n"
    )
    assert reason_and_rule(text) == ("framework_error", "triton-kernel-resources")


def test_cudas_own_out_of_memory_error_stays_gpu_oom() -> None:
    # the guard: the new exclusion only concerns Triton's "out of resource"
    assert reason_of("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n") == "gpu_oom"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # pytorch/PiPPy#1054 (case 3607): the pipeline schedule's report, its message after an empty exception line
        (
            '[rank0]:  File "/home/dev/pippy/pippy/PipelineSchedule.py", line 248, in step_microbatches\n'
            "[rank0]:    self._stage.backward_one_chunk(bwd_mb_index)\n"
            "[rank0]:RuntimeError: \n"
            "[rank0]:        Failed to run stage backward:\n"
            "[rank0]:        Stage output: ('Tensor(torch.Size([10]), grad=True)',)\n",
            "framework_error",
            "pipeline-stage-failed",
        ),
        # bghira/SimpleTuner#2712 (case 3621): ranks in different collectives
        (
            "[RANK 1] 2026-05-19 10:10:29,701 [ERROR] GPU circuit breaker OPEN: cuda_error - Detected mismatch between collectives on ranks. Rank 1 is running collective: CollectiveFingerPrint(SequenceNumber=101, OpType=ALLGATHER, TensorShape=[1])\n",
            "framework_error",
            "collective-mismatch",
        ),
        # KimMeen/Time-LLM#158 (case 3610): a privileged port refused to the store's server socket
        (
            "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. The server socket has failed to bind to [::]:98 (errno: 13 - Permission denied). The server socket has failed to bind to 0.0.0.0:98 (errno: 13 - Permission denied).\n",
            "permission_error",
            "permission",
        ),
        # pytorch/xla#2483 (case 3634): torch_xla refusing a process count the TPU host cannot take
        (
            "ValueError: The number of devices must be either 1 or 8, got 2 instead\n",
            "argument_error",
            "launch-gpu-setup",
        ),
    ],
)
def test_frameworks_and_launches_in_their_own_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # modelscope/ms-swift#5884 (case 3613): torchrun's agent told to stop by SIGHUP
        (
            "W0920 09:10:41.194000 84933 site-packages/torch/distributed/elastic/agent/server/api.py:719] Received 1 death signal, shutting down workers\n",
            "preempted",
            "sigterm",
        ),
        # PrimeIntellect-ai/prime-rl#1360 (case 3614): and by SIGTERM
        (
            "W1130 12:13:49.388000 124326 torch/distributed/elastic/agent/server/api.py:723] Received 15 death signal, shutting down workers\n",
            "preempted",
            "sigterm",
        ),
        # megagonlabs/t5-japanese#1 (case 3650): a TPU worker whose heartbeat stopped
        (
            "INFO:tensorflow:ShutdownHook: lame workers found: HeartbeatManager(/job:worker/replica:0/task:0/device:CPU:0)\n",
            "node_failure",
            "tpu-lame-workers",
        ),
        # ray-project/ray#9044 (case 3675): Ray's launcher taking a worker node down under the run
        (
            "2020-06-16 21:26:07,014\tINFO commands.py:136 -- kill_node: Shutdown worker i-0baab8b79abe4649d\n",
            "node_failure",
            "cluster-node-shut-down",
        ),
        # pytorch/pytorch#67616 (case 3663): the rendezvous closed under the surviving agents
        ("torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n", "network_error", "rendezvous-closed"),
        # kubeflow/website#4186 (case 3677): the store's peer closed the connection
        (
            "[W822 03:54:49.636977195 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=15, addr=[node-0-1.svc.cluster.local]:60560, remote=[node-0-0.svc.cluster.local]:29500): failed to recv, got 0 bytes\n",
            "network_error",
            "connection-reset",
        ),
        # aws-neuron/aws-neuron-sdk#713 (case 3642): Neuron's collectives bootstrapping in vain
        (
            "2023-Aug-01 16:14:43.0256 332066:332298 [1] include/socket.h:579 CCOM WARN Timeout waiting for RX (waited 120 sec) - retrying\n",
            "network_error",
            "connection-reset",
        ),
    ],
)
def test_runs_stopped_from_outside(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_the_rendezvous_closed_is_a_consequence_of_torchs_own_race() -> None:
    # pytorch/pytorch#132950 (case 3661): the worker's EtcdKeyNotFound says why the master's rendezvous closed
    text = "etcd.EtcdKeyNotFound: Key not found : /torch/elastic/store\ntorch.distributed.elastic.rendezvous.api.RendezvousClosedError\n"
    assert reason_and_rule(text) == ("framework_error", "etcd-rendezvous-key-missing")


def test_horovods_timestamped_rank_prefix() -> None:
    # horovod/horovod#2248 (case 3666): horovodrun's ctime stamp before the rank
    line = "Fri Sep 11 07:07:20 2020[0]<stderr>:bash: line 1: 3523705 Aborted                 HOROVOD_RANK=0 python train.py"
    assert normalize(line) == ("bash: line 1: 3523705 Aborted                 HOROVOD_RANK=0 python train.py", 0)
    assert reason_of(line + "\n") == "framework_error"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # HabanaAI/Model-References#10 (case 3631): Gaudi's workspace allocation failing
        (
            "RuntimeError: FATAL ERROR :: MODULE:SYNHELPER workspace Allocation of size ::14493510400 failed!\n",
            "gpu_oom",
            "emitter-gpu-oom",
        ),
        # marin-community/marin#2618 (case 3647): a TPU held by another process
        (
            "Failed to initialize TPU system with error: FAILED_PRECONDITION: open(/dev/vfio/0): Device or resource busy: Device or resource busy; Couldn't open iommu group /dev/vfio/0\n",
            "cuda_error",
            "emitter-gpu-fault",
        ),
        # THU-MIG/yolov10#305 (case 3648): Metal's kernel asserting, glued after a progress bar
        (
            "  0%|          | 0/19 [00:00<?, ?it/s]/AppleInternal/Library/BuildRoots/91a3/Library/Caches/com.apple.xbs/Sources/MetalPerformanceShaders/MPSNDArray/Kernels/MPSNDArrayGatherND.mm:256: failed assertion `Rank of updates array (1) must be greater than or equal to inner-most dimension of indices array (300)'\n",
            "framework_error",
            "native-objc-assertion",
        ),
        # huggingface/transformers#7976 (case 3645): an XLA checkpoint torch.load cannot place
        (
            "Exception in device=TPU:5: don't know how to restore data location of torch.FloatStorage (tagged with xla:0)\n",
            "checkpoint_load_error",
            "checkpoint-load-failed",
        ),
        # foundation-model-stack/fms-hf-tuning#432 (case 3667): the newest checkpoint folder without its state
        (
            "FileNotFoundError: [Errno 2] No such file or directory: '/cos1/output/sg/fine-tuned-tiny-llama-new3/checkpoint-25/trainer_state.json'\n",
            "checkpoint_load_error",
            "checkpoint-incomplete",
        ),
        # googlecolab/colabtools#1177 (case 3651): the TPU's service account refused a write to the bucket
        (
            "PermissionDeniedError: Error executing an HTTP request: HTTP response code 403 with body '{\n"
            '    "message": "service-495559152420@cloud-tpu.iam.gserviceaccount.com does not have storage.objects.create access to bucketname/train/events.out.tfevents.1587750594.v2.",\n',
            "permission_error",
            "cloud-access-denied",
        ),
        # kingoflolz/mesh-transformer-jax#154 (case 3652): a checkpoint write's retries given up
        (
            "saving a checkpoint for step 1\nsave failed, trying again\nsave failed 3 times, exiting\n",
            "storage_error",
            "checkpoint-save-retries-exhausted",
        ),
    ],
)
def test_accelerators_and_checkpoints_beside_cuda(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
