"""Classes of misses from issue 19's rounds sixty-four to sixty-six (corpus cases 3051-3072: GPU node health and
hardware faults; 3081-3102: launchers, schedulers and cloud fabrics; 3111-3132: numerics, FP8 and 8-bit optimizers,
checkpoint save and resume). Error messages are verbatim from the public reports named in each test; hosts, paths and
pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

_ORTE = """--------------------------------------------------------------------------
ORTE was unable to reliably start one or more daemons.
This usually is caused by:
"""


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # volcano-sh/volcano#2226 and #2745 (cases 3081, 3082): ssh cannot resolve a worker's name
        (
            "ssh: Could not resolve hostname lm-horovod-job-worker-5.lm-horovod-job: Name or service not known\n"
            + _ORTE,
            "network_error",
            "host-name-unresolved",
        ),
        (
            "ssh: Could not resolve hostname horovod-volcano-sothisai-w1-0: Temporary failure in name resolution\n"
            + _ORTE,
            "network_error",
            "host-name-unresolved",
        ),
        # kubeflow/mpi-operator#424 (case 3086): ssh refuses the launcher's key
        (
            "Permission denied, please try again.\nroot@tensorflow-benchmarks-worker-1.tensorflow-benchmarks-worker: Permission denied (publickey,password).\n"
            + _ORTE,
            "permission_error",
            "permission",
        ),
        ("Authentication refused: bad ownership or modes for directory /root/.ssh\n", "permission_error", "permission"),
        # mozilla/translations#400 (case 3102): a spot VM's power button, no termination notice
        (
            "Jan 30 10:33:00Z translations-1-b-linux-v100-gpu-4 start-worker 2024/01/30 10:33:00 polling for termination-time\n"
            "Jan 30 10:33:08Z translations-1-b-linux-v100-gpu-4 systemd-logind Power key pressed.\n",
            "preempted",
            "acpi-power-off",
        ),
    ],
)
def test_a_launch_that_cannot_reach_its_workers_says_why(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text, "launcher.log") == (reason, rule)


def test_a_launcher_refusing_its_host_list_is_the_launch_s() -> None:
    # volcano-sh/volcano#1321 (case 3083): horovodrun's own check of the hosts it was given
    text = """
Traceback (most recent call last):
  File "/usr/local/bin/horovodrun", line 21, in <module>
    run.run()
  File "/usr/local/lib/python3.6/dist-packages/horovod/run/run.py", line 611, in run
    raise ValueError('Invalid host input, please make sure it has '
ValueError: Invalid host input, please make sure it has format as : worker-0:2,worker-1:2.
"""
    assert reason_and_rule(text) == ("argument_error", "launcher-refused-input")
    # the same ValueError raised by the training script stays the script's
    own = text.replace("/usr/local/lib/python3.6/dist-packages/horovod/run/run.py", "/workspace/train.py")
    assert reason_of(own) == "script_error"


def test_kernel_lines_pasted_without_their_host_keep_the_drivers_tag() -> None:
    # forums.developer.nvidia.com, RTX PRO 6000 under vLLM (case 3053): "kernel:" right after the time
    text = """
Mar 27 17:40:36 kernel: NVRM: Xid (PCI:0000:01:00): 62, 223b6a66 00002100 00000000 20662342 20662ba6 20664272 2065f7ca 2063f48c
Mar 27 17:40:36 kernel: NVRM: GPU0 _kgspRpcGspEventPmuHalted: Received signal from GSP that PMU has halted.
Mar 27 17:40:36 kernel: NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
"""
    assert reason_of(text, "kern.log") == "gpu_hardware"
    assert normalize("Mar 27 17:40:36 kernel: NVRM: Xid (PCI:0000:01:00): 62, 223b6a66")[0].startswith("NVRM: Xid")
    # a host field is still read past as before
    assert normalize("Mar 27 17:40:36 gpu-n07 kernel: NVRM: Xid (PCI:0000:01:00): 62")[0].startswith("NVRM: Xid")


def test_a_health_checks_xid_report_and_a_fabric_that_is_not_ready() -> None:
    # mej/nhc#147 (case 3064): NHC's check_xid_errors
    assert (
        reason_of("Found XID errors: 63\nNode Health Check failed.  Check check_xid_errors returned 1\n", "nhc.log")
        == "gpu_hardware"
    )
    # NVIDIA/gpu-operator#1043 (case 3052): CUDA's "system not yet initialized" on NVSwitch nodes
    text = "Failed to allocate device vector A (error code system not yet initialized)! [Vector addition of 5000 elements]\n"
    assert reason_and_rule(text, "cuda-validation.log") == ("nvlink_error", "cuda-system-not-ready")


def test_srun_labels_padded_to_two_digits_are_read_past() -> None:
    # NVIDIA-NeMo/Megatron-Bridge#2355 (case 3118): srun -l pads a task's label (" 93: ")
    text = """
 93: !!!!!!! Segfault encountered !!!!!!!
 93:   File "<unknown>", line 0, in crc32_16bytes(void const*, unsigned long, unsigned int)
 93:   File "<unknown>", line 0, in mz_crc32
"""
    assert reason_and_rule(text, "slurm-4410517.out") == ("framework_error", "segfault-in-text")
    assert normalize(" 93: !!!!!!! Segfault encountered !!!!!!!") == ("!!!!!!! Segfault encountered !!!!!!!", 93)


@pytest.mark.parametrize(
    "line",
    [
        # NVIDIA-NeMo/Speech#14906 (case 3119): UCX's handler
        "[c608-061:2760180:0:2760180] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x400581d86000)",
        # google-research/t5x#366 (case 3127): glog's banner with a link to its docs
        "*** SIGSEGV (@0x7d10036789c), see gl__________41#s15 received by PID 3569820 (TID 3572240) on cpu 97; stack trace: ***",
    ],
)
def test_a_segfault_in_a_crash_handlers_words(line: str) -> None:
    assert reason_and_rule(line + "\n") == ("framework_error", "segfault-in-text")


def test_an_exception_hooks_uncaught_exception_is_the_process_s_end() -> None:
    # allenai/OLMo#664 (case 3113): a tab-separated log line, the hook's "Uncaught <type>: <message>"
    text = (
        "2024-07-17T04:30:51.202069810Z 2024-07-16 21:30:51.201\tnode-aus-121.cluster.internal:0\tolmo.train:1268\tINFO\tSaving final checkpoint...\n"
        "2024-07-17T04:30:52.220928528Z 2024-07-16 21:30:52.219\tnode-aus-121.cluster.internal:5\tolmo.util:163\tCRITICAL\tUncaught AssertionError: "
        "TorchLegacyShardedCheckpointer is being called to save a model where `distributed_strategy` is not FSDP.\n"
    )
    assert reason_and_rule(text) == ("framework_error", "exception-AssertionError")


def test_a_loss_scale_that_overflows_at_its_floor_is_divergence() -> None:
    # huggingface/transformers#14834 (case 3116)
    text = """
[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:275:_update_scale] Grad overflow on iteration: 445299
[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:277:_update_scale] Reducing dynamic loss scale from 1 to 1
[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:202:step] [deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 1, reducing to 1
"""
    assert reason_and_rule(text) == ("loss_divergence", "loss-nan")
    # an ordinary halving is not
    halving = (
        "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 65536, reducing to 32768\n"
    )
    assert reason_of(halving) == "unknown"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # mozilla/DeepSpeech#374 (case 3120): TF's RESOURCE_EXHAUSTED is the disk here, not the GPU
        (
            "InternalError (see above for traceback): Error writing (tmp) checkpoint file: /home/dsuser/.local/share/deepspeech_wer/checkpoint/205aed8/model.ckpt-6.tempstate9784191321997661396: Resource exhausted: /home/dsuser/.local/share/deepspeech_wer/checkpoint/205aed8/model.ckpt-6.tempstate9784191321997661396\n",
            "storage_error",
            "storage",
        ),
        # google/tensorstore#183 (case 3129): a network file system without the lock call
        (
            'ValueError: FAILED_PRECONDITION: Error writing local file "/home/u/runs/1/actor_params.orbax-checkpoint-tmp-1695894959581296/_sharding": Failed to acquire lock on file: /home/u/runs/1/actor_params.orbax-checkpoint-tmp-1695894959581296/_sharding.__lock [OS error: Function not implemented]\n',
            "storage_error",
            "storage",
        ),
        # NVIDIA/cosmos#69 and NVIDIA-NeMo/Speech#10386 (cases 3131, 3132): an entry the checkpoint lacks
        (
            "[rank0]: RuntimeError: Missing key in checkpoint state_dict: module.decoder.layers.self_attention.q_layernorm._extra_state/shard_0_16.\n",
            "checkpoint_load_error",
            "state-dict",
        ),
        (
            "megatron.core.dist_checkpointing.core.CheckpointingException: Object shard /ckpt/model_weights/model.decoder.layers.self_attention.core_attention._extra_state/shard_0_80.pt not found\n",
            "checkpoint_load_error",
            "state-dict",
        ),
    ],
)
def test_a_checkpoint_s_storage_and_entries_in_their_writers_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # InternLM/xtuner#247 (case 3121): bitsandbytes' own CUDA check
        (
            "Error operation not supported at line 380 in file /mmfs1/gscratch/zlab/timdettmers/git/bitsandbytes/csrc/pythonInterface.c\n",
            "cuda_error",
            "c-library-cuda-check",
        ),
        # the same check naming a kernel the build lacks stays the installation's (case 2878)
        (
            "Error no kernel image is available for execution on the device at line 167 in file D:\\ai\\tool\\bitsandbytes\\csrc\\ops.cu\n",
            "import_error",
            "no-kernel-image",
        ),
        # pytorch/ao#2904 (case 3122): CUTLASS built without the GPU's arch-specific target
        (
            "ERROR : Arch conditional MMA instruction used without targeting appropriate compute capability. Aborting.\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
        # bitsandbytes-foundation/bitsandbytes#383 (case 3130): cuBLAS's NOT_SUPPORTED on an H100
        (
            "cuBLAS API failed with status 15\nerror detectedA: torch.Size([304, 4096]), B: torch.Size([4096, 4096])\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
    ],
)
def test_a_cuda_library_s_own_report(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_rich_traceback_cut_above_its_frames_is_read_from_them() -> None:
    # princeton-nlp/LLM-Shearing#23 (case 3126): no header, a path wrapped inside a name and one after a slash
    text = """
│ /root/miniconda3/envs/shearing/lib/python3.10/site-packages/torch/nn/modules/m │
│ odule.py:1818 in state_dict                                                    │
│                                                                                │
│ ❱ 1818 │   │   │   │   module.state_dict(destination=destination, prefix=prefi │
│                                                                                │
│ /root/miniconda3/envs/shearing/lib/python3.10/site-packages/torch/distributed/ │
│ fsdp/_state_dict_utils.py:109 in _enter_unshard_params_ctx                     │
│                                                                                │
│   106 │   │   offload_to_cpu=offload_to_cpu,                                   │
│   107 │   │   with_grads=with_grads,                                           │
NotImplementedError: offload_to_cpu=True and NO_SHARD is not supported yet
"""
    assert reason_and_rule(text) == ("framework_error", "exception-NotImplementedError")
    # the same frames in the run's own code are the script's
    own = text.replace(
        "/root/miniconda3/envs/shearing/lib/python3.10/site-packages/torch/distributed/",
        "/workspace/shearing/llmshearing/",
    )
    assert reason_of(own) == "script_error"
