"""Classes of misses from issue 19's fourteenth round, batch B (corpus cases 1320-1334: vision-language, video,
document AI / OCR, human-body and graph training runs): a CUDA math library whose handle could not be
created (and every library's allocation failure), a Hydra plugin's config group that is not installed, and
the interpreter's own TypeError and ValueError sentences met without the exception's name. Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from gpuwatch.diagnosis.engine import diagnose_rules
from tests.gpuwatch.diagnosis.real_text import log_source, reason_and_rule, reason_of

# ---------------------------------------------------------------- a CUDA library that could not start

# NielsRogge/Transformers-Tutorials#46 (case 1327): LayoutLMv2 trained from the notebook on the user's data.
_CUDNN_NOT_INITIALIZED = """
  0%|          | 0/1000 [00:00<?, ?it/s]
RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED
"""


def test_cudnn_not_initialized_is_a_cuda_fault() -> None:
    assert reason_and_rule(_CUDNN_NOT_INITIALIZED) == ("cuda_error", "cuda-library-status")


def test_the_other_libraries_not_initialized_is_a_cuda_fault_too() -> None:
    assert reason_of("RuntimeError: cusparse error: CUSPARSE_STATUS_NOT_INITIALIZED") == "cuda_error"


def test_a_librarys_allocation_failure_is_the_gpus_memory() -> None:
    # The same wording with cuDNN's allocation status: gpu_oom, as CUBLAS_STATUS_ALLOC_FAILED always was.
    assert reason_and_rule("RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED") == ("gpu_oom", "cuda-oom")
    assert (
        reason_of("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
        == "gpu_oom"
    )


def test_a_cudnn_refusal_of_its_arguments_is_not_a_fault() -> None:
    assert (
        reason_of(
            "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input."
        )
        != "cuda_error"
    )


# ---------------------------------------------------------------- a Hydra plugin not installed

# shubham-goel/4D-Humans#165 (case 1328): HMR 2.0's train.py before training starts.
_HYDRA_COLORLOG = """
In 'hydra/config': Could not find 'hydra/job_logging/colorlog'

Available options in 'hydra/job_logging':
        default
        disabled
        none
        stdout
Config search path:
        provider=hydra, path=pkg://hydra.conf
        provider=main, path=file:///data/wtx/Multi-Person_code/code/4D-Humans/hmr2/configs_hydra
        provider=schema, path=structured://

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


def test_hydras_own_group_option_that_a_plugin_provides_is_an_installation_problem() -> None:
    assert reason_and_rule(_HYDRA_COLORLOG) == ("import_error", "hydra-plugin-config-missing")


def test_a_launcher_plugin_named_by_the_missing_config_exception() -> None:
    assert (
        reason_of(
            "hydra.errors.MissingConfigException: In 'hydra/config': Could not find 'hydra/launcher/submitit_slurm'"
        )
        == "import_error"
    )


def test_a_missing_option_of_the_users_own_group_is_not_a_plugin() -> None:
    assert reason_of("In 'config': Could not find 'model/resnet50'") != "import_error"


# ---------------------------------------------------------------- the interpreter's sentences, unnamed

# shunsukesaito/PIFu#166 (case 1331): the report quotes the message alone.
_UNPACK_UNNAMED = """
$ python -m apps.train_shape --dataroot ./training_data --random_flip --random_scale --random_trans
cannot unpack non-iterable int object.
"""


def test_an_unpacking_message_without_its_exception_name_is_the_callers() -> None:
    assert reason_and_rule(_UNPACK_UNNAMED) == ("script_error", "python-value-message-unnamed")


def test_the_same_sentences_from_a_handler_without_the_name() -> None:
    assert reason_of("ERROR:root:not enough values to unpack (expected 2, got 1)") == "script_error"
    assert reason_of("Training failed: 'NoneType' object is not subscriptable") == "script_error"


def test_a_named_typeerror_in_a_librarys_frame_stays_the_librarys() -> None:
    # The message rule leaves a line that names the exception to the traceback's frames.
    text = """
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl
    return forward_call(*args, **kwargs)
  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/_utils/collate.py", line 141, in default_collate
    elem = batch[0]
TypeError: 'NoneType' object is not subscriptable
"""
    assert reason_and_rule(text) == ("framework_error", "exception-TypeError")


def test_a_later_specific_error_outranks_the_unnamed_message() -> None:
    text = """
cannot unpack non-iterable int object
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total capacity)
"""
    assert diagnose_rules([log_source("train.log", text)]).reason == "gpu_oom"
