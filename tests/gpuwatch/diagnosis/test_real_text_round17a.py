"""Classes of misses from issue 19's seventeenth round (corpus cases 1460-1495: tracking, video object
segmentation, anomaly detection, continual and meta-learning, distillation, adversarial robustness, domain
adaptation, LLM evaluation, genomics and knowledge-graph embeddings): torch's CUDA initialisation failing
in its own words, a driver library that Triton cannot find, expand()'s other shape message, and a BLAS's
own complaint about a call's arguments. Error messages are verbatim from the public reports named in each
test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- torch's CUDA initialisation, in its own words

# dice-group/dice-embeddings#338 (case 1494): the README example, DICE_Trainer asks for the device's name.
_DICEE_CUDA_INIT = """
  File "/home/cdemir/anaconda3/envs/dice/lib/python3.10/site-packages/torch/cuda/__init__.py", line 616, in get_device_properties
    _lazy_init()  # will define _get_device_properties
  File "/home/cdemir/anaconda3/envs/dice/lib/python3.10/site-packages/torch/cuda/__init__.py", line 412, in _lazy_init
    torch._C._cuda_init()
RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.
"""


def test_torchs_cuda_unknown_error_at_initialisation_is_a_cuda_error() -> None:
    assert reason_and_rule(_DICEE_CUDA_INIT) == ("cuda_error", "cuda-fault")


def test_the_runtimes_wording_of_the_same_error_still_is() -> None:
    # yeeeqichen/KGQA#9 (case 1493)
    assert reason_of("RuntimeError: CUDA error: unknown error") == "cuda_error"


# ---------------------------------------------------------------- a driver library Triton cannot find

# MAGICS-LAB/DNABERT_2#56 (case 1492): fine-tuning from a notebook, the forward pass.
_DNABERT2_LIBCUDA = """
---------------------------------------------------------------------------
AssertionError                            Traceback (most recent call last)
<ipython-input-30-7c37553b6273> in <cell line: 3>()
      2 model.to(device)
      3 for b in train_loader_mini:
----> 4   model(b['input_ids'].to(device), b['attention_mask'].to(device))

29 frames
/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py in _wrapped_call_impl(self, *args, **kwargs)
   1516             return self._compiled_call_impl(*args, **kwargs)  # type: ignore[misc]
   1517         else:
-> 1518             return self._call_impl(*args, **kwargs)

AssertionError: libcuda.so cannot found!
"""


def test_tritons_missing_libcuda_is_the_installations() -> None:
    assert reason_and_rule(_DNABERT2_LIBCUDA) == ("import_error", "undefined-symbol")


def test_other_assertions_about_files_are_not() -> None:
    assert reason_of("AssertionError: config.yaml cannot found!") != "import_error"


# ---------------------------------------------------------------- expand()'s other shape message

# QData/deepWordBug#5 (case 1483): attack.py written for torch 0.3, run under 0.4.
_DEEPWORDBUG_EXPAND = """
RuntimeError: expand(torch.cuda.FloatTensor{[128, 1]}, size=[128]): the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)
"""


def test_expand_given_fewer_sizes_than_dimensions_is_the_callers_tensor() -> None:
    assert reason_and_rule(_DEEPWORDBUG_EXPAND) == ("script_error", "layer-input-shape")


def test_expand_raised_below_a_frameworks_frame_keeps_the_frame_rule() -> None:
    # the README's rule: the same message with its last frame inside a framework is the framework's
    text = """
Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 1842, in forward
    loss = self.module(*inputs, **kwargs)
RuntimeError: The expanded size of the tensor (531) must match the existing size (512) at non-singleton dimension 1.  Target sizes: [2, 531].  Tensor sizes: [1, 512]
"""
    bare = "RuntimeError: expand(torch.FloatTensor{[4, 1]}, size=[4]): the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)"
    assert reason_of(text) == reason_of(text.replace(text.strip().splitlines()[-1], bare))


# ---------------------------------------------------------------- a BLAS refusing a call's arguments

# pankajmishra000/VT-ADL#3 (case 1467): train.py on Windows, the traceback cut in torch's frames.
_VT_ADL_SGEMM = r"""
Network training started.....
 ** On entry to SGEMM  parameter number 10 had an illegal value
Traceback (most recent call last):
  File "D:\Code\VT-ADL-master\train.py", line 68, in <module>
    vector, reconstructions = model(j.cuda())
  File "D:\Code\VT-ADL-master\student_transformer.py", line 115, in forward
    x = self.patch_to_embedding(x)
  File "D:\ProgramData\Anaconda3\envs\env1\lib\site-packages\torch\nn\modules\module.py", line 1051, in _call_impl
    return forward_call(*input, **kwargs)
"""


def test_a_blas_refusing_a_calls_arguments_is_the_cublas_status() -> None:
    assert reason_and_rule(_VT_ADL_SGEMM) == ("cuda_error", "blas-illegal-parameter")


def test_the_cublas_status_after_it_still_decides() -> None:
    # open-edge-platform/anomalib#762 (case 1466)
    text = (
        _VT_ADL_SGEMM
        + "RuntimeError: CUDA error: CUBLAS_STATUS_INVALID_VALUE when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`\n"
    )
    assert reason_and_rule(text) == ("cuda_error", "cuda-fault")


def test_a_specific_error_after_it_outranks_it() -> None:
    text = _VT_ADL_SGEMM + "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert reason_of(text) == "gpu_oom"
