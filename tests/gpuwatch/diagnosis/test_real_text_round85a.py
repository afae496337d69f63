"""Classes of misses from issue 19's rounds eighty-five to eighty-seven (corpus cases 3701-3723, 3731-3754 and
3761-3781: reports from PyTorch, Hugging Face and the large-model frameworks taken as the search returned them), with
older misses they share a class with. Error messages are verbatim from the public reports named in each test; hosts,
paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    "text",
    [
        # princeton-nlp/MeZO#11 (case 3748): the Trainer's evaluation calling a collective no set-up initialised
        'Traceback (most recent call last):\n  File "../mezo/large_models/run.py", line 498, in main\n    framework.train(train_samples,\nRuntimeError: Default process group has not been initialized, please make sure to call init_process_group.\n',
        # cases 3023 and 3579 (older misses): Lightning restoring a DeepSpeed checkpoint; SageMaker's mpirun ranks
        "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.\n",
        "[1,5]<stdout>:RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.\n",
    ],
)
def test_a_missing_default_process_group_is_the_frameworks(text: str) -> None:
    assert reason_and_rule(text) == ("framework_error", "process-group-not-initialized")


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # hiyouga/LlamaFactory#826 (case 3742): the Trainer asking for the package that trains a quantised model
        (
            "ValueError: The model you want to train is loaded in 8-bit precision.  if you want to fine-tune an 8-bit model, please make sure that you have installed `bitsandbytes>=0.37.0`. \n",
            "import_error",
            "package-install-required",
        ),
        # NVIDIA-NeMo/Speech#8652 (case 3776): numba's NVVM and the CUDA toolkit that do not fit
        (
            "numba.cuda.cudadrv.error.NvvmError: Failed to verify\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n",
            "import_error",
            "numba-nvvm-verify",
        ),
        # hiyouga/LlamaFactory#3953 (case 3766): a console script's Windows launcher without its interpreter
        (
            "05/29/2024 10:21:47 - INFO - llamafactory.cli - Initializing distributed tasks at: 127.0.0.1:29437\nfailed to create process.\n",
            "file_not_found",
            "windows-script-launcher",
        ),
        # hiyouga/LlamaFactory#3224 (case 3738): a DeepSpeed config that disagrees with the training arguments
        (
            "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:\n- ds bf16.enabled=True vs hf bf16|bf16_full_eval=False\nThe easiest method is to set these DeepSpeed config values to 'auto'.\n",
            "argument_error",
            "deepspeed-config-mismatch",
        ),
    ],
)
def test_installations_and_launches_in_the_trainers_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_warning_that_asks_for_a_package_is_not_the_failure() -> None:
    # the guard: the request must be an exception's message, not a log line the run went on from
    text = "WARNING: flash-attn is not available, please install flash-attn for faster training\nEpoch 1: 100%|██████████| 250/250 [01:02<00:00, 4.01it/s, loss=0.412]\n"
    assert reason_of(text) == "unknown"


def test_nemo_runs_task_prefix_carries_the_rank() -> None:
    # NVIDIA-NeMo/Run#16 (case 3773): every line behind NeMo-Run's "<task>/<rank> "; the segfault's frames are NCCL's
    line = "nemo.collections.llm.api.finetune/0 [10-7-133-247:16170:0:17316] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x3800)"
    assert normalize(line) == (
        "[10-7-133-247:16170:0:17316] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x3800)",
        0,
    )
    text = (
        line
        + "\nnemo.collections.llm.api.finetune/0 ==== backtrace (tid:  17316) ====\n"
        + "nemo.collections.llm.api.finetune/0  0 0x0000000000042520 __sigaction()  ???:0\n"
        + "nemo.collections.llm.api.finetune/0  1 0x00000000000736aa pncclCommDeregister()  ???:0\n"
        + "nemo.collections.llm.api.finetune/0  3 0x000000000005a30a ncclCommAbort()  ???:0\n"
    )
    assert reason_of(text) == "nccl_error"
