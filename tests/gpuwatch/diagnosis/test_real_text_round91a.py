"""Classes of misses from issue 19's rounds ninety-one to ninety-three (corpus cases 3901-3922, 3931-3952 and
3961-3982: reports from speech training, TensorFlow/Keras/JAX and multi-node training taken as the search returned
them). Error messages are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # PeizeSun/SparseR-CNN#33 (case 3974): gloo with no interface for the address it resolved
        (
            "RuntimeError: [enforce fail at /opt/conda/conda-bld/pytorch_1595629416375/work/third_party/gloo/gloo/transport/tcp/device.cc:208] ifa != nullptr. Unable to find interface for: [0.0.8.34]\n",
            "network_error",
            "gloo-network-setup",
        ),
        # pytorch/pytorch#135355 (case 3961): two machines of different address families
        ("[rank0]: RuntimeError: ss1.ss_family == ss2.ss_family. 2 vs 10\n", "network_error", "gloo-network-setup"),
        # RobinWu218/SimDINO#15 (case 3976): the ranks' full mesh never made
        (
            "[E314 16:42:10.528865173 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n",
            "network_error",
            "gloo-network-setup",
        ),
        # NVIDIA/nccl#626 and sail-sg/zero-bubble-pipeline-parallelism#60 (cases 3981, 3982): NCCL's size check
        (
            "dell-PowerEdge-T640:342239:342305 [0] transport/net_socket.cc:424 NCCL WARN NET/Socket : peer 192.168.161.30<59210> message truncated : receiving 1048576 bytes instead of 65536\n",
            "nccl_error",
            "nccl-message-truncated",
        ),
        # google/flax#4942 (case 3938): XLA's NCCL call refused its arguments, as NCCL's invalid argument is the launch's
        (
            "jaxlib._jax.XlaRuntimeError: INTERNAL: NCCL operation ncclAllReduce( send_buffer.opaque(), recv_buffer.opaque(), ToNcclCount(dtype, count), nccl_dtype, ToNcclReduction(reduction_kind), comm_, se::gpu::AsGpuStreamValue(stream)) failed: invalid argument (run with NCCL_DEBUG=WARN for details).\n",
            "argument_error",
            "job-spec-refused",
        ),
    ],
)
def test_multi_node_transports(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_an_interface_named_in_yoloxs_own_code_stays_the_frameworks() -> None:
    # Megvii-BaseDetection/YOLOX#139 (case 3975): YOLOX's gloo group asks for ib0, from a checkout named for YOLOX
    text = """Traceback (most recent call last):
  File "/hdd2/wangxg/YOLOX-main/yolox/utils/dist.py", line 105, in _get_global_gloo_group
    return dist.new_group(backend="gloo")
RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: ib0
"""
    assert reason_of(text) == "framework_error"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # tensorflow/tensorflow#45658 (case 3934): TensorFlow's GPU event manager finding a CUDA event failed
        (
            "2020-12-13 21:47:05.318264: F tensorflow/core/common_runtime/gpu/gpu_event_mgr.cc:273] Unexpected Event status: 1\n",
            "cuda_error",
            "tf-gpu-event-status",
        ),
        # facebookresearch/silk#71 (case 3941): a CPU-only jaxlib handed a GPU tensor
        (
            "jaxlib.xla_extension.XlaRuntimeError: INVALID_ARGUMENT: DLPack tensor is on GPU, but no GPU backend was provided.\n",
            "import_error",
            "jax-no-gpu-backend",
        ),
        # google-research/google-research#535 (case 3948): XLA without a bf16 all-reduce on GPU
        (
            "RuntimeError: Unimplemented: Requested AllReduce not implemented on GPU; replica_count: 2; operand_count: 131; IsCrossReplicaAllReduce: 1; NCCL support: 1; first operand array element-type: BF16\n",
            "framework_error",
            "xla-collective-unimplemented",
        ),
        # jax-ml/jax#29088 (case 3949): XLA's verifier on the program it compiled
        (
            "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: during context [hlo verifier]: Expected instruction to have shape equal to f32[16,2,1000,336,3], actual shape is f32[1000,16,2,336,3]:\n",
            "framework_error",
            "xla-hlo-verifier",
        ),
        # cookcodes/Percepnet-Keras#3 (case 3937): Keras refusing an object of the run's own class
        (
            "ValueError: Failed to find data adapter that can handle input: <class '__main__.CustomDataGen'>, <class 'NoneType'>\n",
            "script_error",
            "keras-input-of-the-scripts-class",
        ),
        # HiKapok/SSD.TensorFlow#43 (case 3936): TensorFlow's cross-device reduction check
        (
            "Traceback (most recent call last):\n  ...\nValueError: destinations must be one of a `DistributedValues` object, a device string, a list of device strings or None\n",
            "framework_error",
            "tf-distribute-destinations",
        ),
    ],
)
def test_tensorflow_keras_and_jax_in_their_own_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_keras_refusal_of_a_librarys_own_type_is_not_read_as_the_scripts_class() -> None:
    # the guard: only an object of the run's own module (__main__) is the new rule's; a library's type is left to the
    # exception's own reading
    text = "ValueError: Failed to find data adapter that can handle input: <class 'tensorflow.python.data.ops.dataset_ops.DatasetV2'>, <class 'NoneType'>\n"
    assert reason_and_rule(text)[1] != "keras-input-of-the-scripts-class"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # facebookresearch/fairseq#4073 (case 3917): every sample skipped by the length filters
        (
            "Exception: The dataset is empty. This could indicate that all elements in the dataset have been skipped. Try increasing the max number of allowed tokens or using a larger dataset.\n",
            "dataloader_error",
            "dataset-empty-after-filters",
        ),
        # huggingface/transformers#22744 (case 3911): the Seq2SeqTrainer's lookup on the wrapper it made
        (
            "AttributeError: 'DataParallel' object has no attribute 'generation_config'\n",
            "framework_error",
            "trainer-wrapper-generation-config",
        ),
        # horovod/horovod#972 (case 3951): Open MPI's signal handler, its backtrace cut to the end
        (
            "[1,1]<stderr>:[hzh-south2north:05439] [21] /lib/x86_64-linux-gnu/libpthread.so.0(+0x76ba)[0x7f6234ac76ba]\n"
            "[1,1]<stderr>:[hzh-south2north:05439] [22] /lib/x86_64-linux-gnu/libc.so.6(clone+0x6d)[0x7f62347fd41d]\n"
            "[1,1]<stderr>:[hzh-south2north:05439] *** End of error message ***\n",
            "framework_error",
            "mpi-signal-handler",
        ),
    ],
)
def test_speech_and_horovod_runs(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
