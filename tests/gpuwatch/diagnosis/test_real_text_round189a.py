"""Classes of misses from issue 19's rounds one hundred and eighty-nine to one hundred and ninety-seven (corpus cases
6480-6641: DeepSpeed, Megatron and FSDP runs; LLM fine-tuning and RLHF; cluster frameworks; Lightning, Accelerate and
the Trainer; vision training; speech and audio; LLM inference servers; RecSys, tabular and RAPIDS; RL and robotics;
reports found by generic queries that show a printed line, taken as the search returned them), and two older misses
of the same classes (1562, 4110). Error messages are verbatim from the public reports named in each test; hosts, paths
and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule

# SwanHubX/SwanLab#1014 (case 6540): the paste kept the raise statement's first line and its message, not the type.
_ACCELERATE_STATE = """
  File "/data/u/envs/brush/lib/python3.9/site-packages/accelerate/accelerator.py", line 322, in __init__
    deepspeed_plugins = AcceleratorState().deepspeed_plugins
  File "/data/u/envs/brush/lib/python3.9/site-packages/accelerate/state.py", line 944, in __init__
    raise ValueError(
Please make sure to properly initialize your accelerator via `accelerator = Accelerator()` before using any functionality from the `accelerate` library.
"""


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        (_ACCELERATE_STATE, "framework_error", "exception-ValueError"),
        # bobazooba/xllm#17 (case 6482): DeepSpeed's CPU Adam whose op never loaded.
        (
            "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n",
            "import_error",
            "deepspeed-op-not-loaded",
        ),
        # catboost/catboost#2292 (case 6626): the framework's own exception type, with no frame shown.
        (
            "_catboost.CatBoostError: C:/Program Files (x86)/Go Agent/pipelines/BuildMaster/catboost.git/catboost/cuda/train_lib/train.cpp:351: Training continuation for GPU is not yet supported\n",
            "framework_error",
            "exception-CatBoostError",
        ),
        # Tlntin/Qwen-TensorRT-LLM#123 (case 6605): an engine built for 4 ranks run with fewer processes.
        (
            "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/home/jenkins/agent/workspace/LLM/release-0.8/L0_PostMerge/tensorrt_llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:90)\n",
            "argument_error",
            "launch-size-not-layout",
        ),
        # s3prl/s3prl#195 (case 6583): optional upstreams skipped ("... Pass."), then the error, then tqdm's bar at 0.
        (
            "[hubconf] can not import .upstream.pase.hubconf: No module named 'pase'... Pass.\n"
            "[Runner] - Start a new experiment\n"
            "AttributeError: 'RandomSampler' object has no attribute 'set_epoch'\n"
            "overall:   0%|          | 0/20000 [00:00<?, ?it/s]\n",
            "script_error",
            "exception-AttributeError",
        ),
        # Older miss 4110 (IEIT-Yuan/Yuan-2.0, a fine-tune in a container): torch's CUDA-initialization warning, nothing after.
        (
            "using world size: 1, data-parallel size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1\n"
            "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:124: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11000). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n",
            "import_error",
            "driver-too-old-warning",
        ),
        # Older case 1562 (chgnet on WSL2): the same warning, the run went on on the CPU and crashed there.
        (
            "/home/u/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:182: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver\n"
            "Floating point exception (core dumped)\n",
            "framework_error",
            "native-crash-reported",
        ),
        # h2oai/h2o-llmstudio#98 (case 6503): FSDP flattening LoRA's float16 weights with float32 ones.
        (
            "ValueError: FlatParameter requires uniform dtype but got torch.float16 and torch.float32\n",
            "framework_error",
            "framework-own-limit",
        ),
    ],
)
def test_round189_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_lost_type_is_read_from_the_raise_statement_above_it() -> None:
    """The same shape in a script's own code: the statement's type (FileNotFoundError) decides, not a bare Exception."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 40, in main\n'
        "    raise FileNotFoundError(\n"
        "Could not find the training split in the given data directory, check data_dir\n"
    )
    assert reason_and_rule(text) == ("file_not_found", "file-not-found")


def test_another_deepspeed_attribute_stays_the_frameworks() -> None:
    text = "AttributeError: 'FP16_DeepSpeedZeroOptimizer' object has no attribute 'ipg_index'\n"
    assert reason_and_rule(text) == ("framework_error", "deepspeed-object-attribute")


def test_a_framework_type_that_blames_the_caller_stays_the_callers() -> None:
    text = "pytorch_lightning.utilities.exceptions.MisconfigurationException: `training_step` must be implemented\n"
    assert reason_and_rule(text) == ("script_error", "exception-MisconfigurationException")


def test_a_tqdm_bar_that_has_moved_is_still_progress() -> None:
    """An exception line met alone that training went on from is no evidence; a bar at 0 had not gone on."""
    text = "AttributeError: 'RandomSampler' object has no attribute 'set_epoch'\noverall:   1%|          | 200/20000 [00:31<51:02, 6.4it/s]\n"
    assert reason_and_rule(text) == ("unknown", None)


def test_a_missing_module_the_log_does_not_say_it_skipped_is_still_evidence() -> None:
    assert reason_and_rule("2024-04-12 14:36:17.072695: No module named 'hiddenlayer'\n") == (
        "import_error",
        "import-bare-message",
    )
