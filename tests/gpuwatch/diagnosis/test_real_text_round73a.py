"""Classes of misses from issue 19's rounds seventy-three to seventy-five (corpus cases 3321-3342: Slurm and HPC-centre
GPU jobs; 3351-3371: DeepSpeed, FSDP and torch.distributed inside training frameworks; 3381-3401: vision and speech
training at scale), with older misses they share a class with. Error messages are verbatim from the public reports
named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # facebookincubator/submitit#1649 (case 3323): a site's plugin rejecting the job
        (
            "submitit.core.utils.FailedJobError: sbatch: error: Job rejected: Please do not specify cores/CPUs/tasks for GPU jobs.\n",
            "argument_error",
            "slurm-request-invalid",
        ),
        # NVIDIA/NeMo-Framework-Launcher#73 (case 3333): getopt on a cluster without pyxis
        (
            "srun: unrecognized option '--container-image'\nTry \"srun --help\" for more information\n",
            "argument_error",
            "cli-parser-refusal",
        ),
        # NVIDIA/enroot#156 and #234 (cases 3330, 3329): the container runtime's refusals through pyxis
        (
            "[2023-05-04T22:50:44.984] [81.0] error: pyxis:     enroot-switchroot: failed to execute: /bin/sh: Permission denied\n",
            "permission_error",
            "permission-go-syscall",
        ),
        (
            "slurmstepd: error: pyxis:   nvidia-container-cli: container error: file lookup failed: /proc/421042/root/fsx/enroot/data/user-1111/pyxis_nemo/etc/debian_version: permission denied\n"
            "slurmstepd: error: pyxis:   [ERROR] /etc/enroot/hooks.d/98-nvidia.sh exited with return code 1\n",
            "permission_error",
            "permission-go-syscall",
        ),
        # NVIDIA/pyxis#88 (case 3326): PMIx's plugin loader
        (
            "A requested component was not found, or was unable to be opened.  This\nmeans that this component is either not installed or is unable to be\nHost:      pgp0202\nFramework: psec\nComponent: munge\n",
            "import_error",
            "mca-component-missing",
        ),
    ],
)
def test_a_cluster_s_launch_in_its_tools_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # deepspeedai/DeepSpeed#6754 (case 3353): a node's client that cannot reach the TCPStore
        (
            "[TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host 10.201.1.72:56328 - retrying (try=0, timeout=600000ms, delay=89618ms): The client socket has timed out after 600000ms while trying to connect to (10.201.1.72, 56328).\n",
            "network_error",
            "connection-reset",
        ),
        # deepspeedai/Megatron-DeepSpeed#338 (case 3355): the store-based barrier half the ranks reached
        (
            "RuntimeError: Timed out initializing process group in store based barrier on rank: 5, for key: store_based_barrier_key:32 (world_size=8, worker_count=4, timeout=0:00:30)\n",
            "network_error",
            "connection-reset",
        ),
        # deepspeedai/Megatron-DeepSpeed#90 (case 3369): an assertion that asks for an option
        (
            '  File "/fsx/u/Megatron-DeepSpeed/megatron/data/t5_dataset.py", line 61, in __init__\n    assert len(self.sentinel_tokens) > 0, "Provide the argument --vocab-extra-ids 100 to the script"\nAssertionError: Provide the argument --vocab-extra-ids 100 to the script\n',
            "argument_error",
            "recipe-option-required",
        ),
        # GUI-R1 (case 3220): vLLM's own limit on a prompt
        (
            "ValueError: Prompt length of 4834 is longer than the maximum model length of 4096.\n",
            "framework_error",
            "framework-own-limit",
        ),
    ],
)
def test_distributed_start_up_and_frameworks_limits(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_torch_compile_s_backend_line_is_part_of_the_traceback() -> None:
    # Lightning-AI/pytorch-lightning#18798 (case 3363): DDPOptimizer's bug, raised inside torch's dynamo
    text = """
  File "/home/u/miniconda3/envs/torch211/lib/python3.9/site-packages/torch/_dynamo/bytecode_transformation.py", line 1028, in transform_code_object
    transformations(instructions, code_options)
backend='compile_fn' raised:
AttributeError: 'MultiheadAttention' object has no attribute 'requires_grad'
"""
    assert reason_and_rule(text) == ("framework_error", "exception-AttributeError")


def test_torchao_run_from_its_checkout_is_a_framework() -> None:
    # pytorch/torchtitan#1703 (case 3367): pytorch/ao's checkout is "ao/torchao"
    text = """
    File "/home/u/ao/torchao/prototype/mx_formats/mx_tensor.py", line 147, in to_mx
      assert data_hp.shape[-1] % block_size == 0, (
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  AssertionError: the last dimension of shape torch.Size([65536, 16]) must be divisible by block_size 32
"""
    assert reason_of(text) == "framework_error"


def test_an_optimizer_restoring_its_state_in_an_ipython_8_traceback() -> None:
    # ultralytics/ultralytics#11188 (case 3385): numbered source lines, their indentation lost
    text = """
File /opt/conda/lib/python3.10/site-packages/torch/optim/adamw.py:84, in AdamW.__setstate__(self, state)
81 group.setdefault("fused", None)
82 state_values = list(self.state.values())
83 step_is_tensor = (len(state_values) != 0) and torch.is_tensor(
---> 84 state_values[0]["step"]
85 )
KeyError: 'step'
"""
    assert reason_and_rule(text, "notebook.log") == ("checkpoint_load_error", "exception-KeyError")


def test_a_fuse_mount_that_dropped_and_a_nan_loss_in_a_json_log() -> None:
    # ultralytics/ultralytics#15768 (case 3401): ENOTCONN on a path
    text = "OSError: [Errno 107] Transport endpoint is not connected: '/gcs/yolo-train-bucket/data/images/train/frame_018342.npy'\n"
    assert reason_and_rule(text) == ("storage_error", "storage")
    # facebookresearch/fairseq#1529 (case 3391): fairseq's JSON stats quote their values
    json_log = '2020-10-01 10:42:40 | INFO | valid | {"epoch": 74, "valid_loss": "nan", "valid_ntokens": "2570.42",\n'
    assert reason_and_rule(json_log) == ("loss_divergence", "loss-not-finite-at-end")
    assert reason_of(json_log.replace('"nan"', '"2.31"')) == "unknown"


def test_a_bracketed_info_level_is_read_past() -> None:
    # cocktailpeanut/fluxgym#118 (case 3243): every line of the trainer's output behind "[time] [INFO] "
    assert normalize("[2024-09-21 18:10:19] [INFO] RuntimeError: x")[0] == "RuntimeError: x"
    # enroot's "[ERROR] " is kept for its rules
    assert normalize("[ERROR] Not enough space left in /tmp (5242880 KB needed)")[0].startswith("[ERROR] ")
