"""Classes of misses from issue 19's rounds sixty-one to sixty-three (corpus cases 2989-2991: multi-node training on
cloud fabrics and launchers; 3019-3028: distributed checkpointing and FP8; 3049-3050: JAX multi-host on GPUs), with
older misses (2646, 2841). Error messages are verbatim from the public reports named in each test; hosts, paths and
pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


def test_the_logging_cookbook_s_prefix_is_read_past() -> None:
    # bghira/SimpleTuner#1880 (case 3019): every line behind "<time> - SimpleTuner - INFO - [rank0]: "
    text = """
2025-10-31 03:11:02,478 - SimpleTuner - INFO - [rank0]:   File "/workspace/SimpleTuner/venv/lib/python3.11/site-packages/torch/distributed/checkpoint/state_dict_loader.py", line 250, in local_step
2025-10-31 03:11:02,478 - SimpleTuner - INFO - [rank0]:     assert metadata is not None
2025-10-31 03:11:02,478 - SimpleTuner - INFO - [rank0]:            ^^^^^^^^^^^^^^^^^^^^
2025-10-31 03:11:02,478 - SimpleTuner - INFO - [rank0]: AssertionError
"""
    assert reason_of(text) == "checkpoint_load_error"


def test_a_traceback_cut_on_its_raise_statement_is_that_exception() -> None:
    # huggingface/open-r1#553 (case 3021)
    text = """
[rank6]: Traceback (most recent call last):
[rank6]:   File "/opt/conda/lib/python3.11/site-packages/transformers/integrations/deepspeed.py", line 504, in deepspeed_load_checkpoint
[rank6]:     raise ValueError(f"Can't find a valid checkpoint at {checkpoint_path}")
"""
    assert reason_of(text) == "checkpoint_load_error"
    # any raise statement: its type and message, at its frame
    other = (
        'Traceback (most recent call last):\n  File "/app/train.py", line 12, in main\n    raise KeyError("labels")\n'
    )
    assert reason_and_rule(other) == ("script_error", "exception-KeyError")


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # deepspeedai/DeepSpeed#3089 (case 3020)
        ('ValueError(f"unknown zero stage {zero_stage}")\n', "framework_error", "framework-own-limit"),
        # apax-hub/apax#465 (case 3026)
        (
            "ValueError: Checkpoint path should be absolute. Got \nnodes/InitalModel/Apax/apax_model/best/3193/default\n",
            "checkpoint_load_error",
            "checkpoint-not-found-by-loader",
        ),
        # rail-berkeley/bridge_data_v2#28 (case 3025) and facebookresearch/dinov2#501 (case 2841)
        (
            "AttributeError: module 'jax.experimental.array_serialization.serialization' has no attribute '_DEFAULT_DRIVER'\n",
            "framework_error",
            "framework-private-api",
        ),
        (
            "[rank0]: AttributeError: 'FullyShardedDataParallel' object has no attribute '_streams'\n",
            "framework_error",
            "framework-private-api",
        ),
        # espnet/espnet#4531 (case 2646)
        (
            "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Timeout waiting for key: default_pg/0/0 after 1800000 ms\n",
            "argument_error",
            "nccl-id-never-published",
        ),
    ],
)
def test_checkpoint_and_framework_internals_and_the_launch(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_project_s_class_lacking_a_private_member_stays_with_its_frame() -> None:
    # Rayhane-mamah/Tacotron-2 (case 1444): the project's own layer class
    assert reason_of("AttributeError: 'Conv1D1x1' object has no attribute '_track_checkpointable'\n") == "script_error"
