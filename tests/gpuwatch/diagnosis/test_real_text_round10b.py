"""Classes of misses from issue 19's tenth round, batch B (corpus cases 959-975: LLM pre-training,
mixture-of-experts and multimodal repositories): a sample the pipeline could not read in the words of the
library that reads it (PIL's decoders, a memory-mapped dataset file shorter than its index), an index tensor
on another device than the tensor it indexes, CUDA failures under Triton's kernel launches, and Megatron's
derivatives run from a checkout. Error messages are verbatim from the public reports named in each test;
hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_of

# ---------------------------------------------------------------- a sample the pipeline could not read

# baaivision/DIVA#4 (case 962): training on CC3M fails now and then on a damaged image; PIL raises from its
# own ImageFile.load, in the training loop, with no DataLoader worker to wrap it.
_DIVA_TRUNCATED = """
2024-08-09 03:13:09 | INFO | epoch 0 | iter 1850/9375 | loss 0.8097 | lr 1.0e-05
Traceback (most recent call last):
  File "/opt/conda/lib/python3.9/site-packages/PIL/ImageFile.py", line 288, in load
    raise OSError(msg)
OSError: image file is truncated (22 bytes not processed)
"""

# argonne-lcf/Megatron-DeepSpeed#28 (case 971): the first attempt of a GPT 1.5B run dies building its
# datasets; numpy cannot map a data file shorter than the index says.
_ALCF_MMAP = """
> building train, validation, and test datasets for GPT ...
[rank1]: Traceback (most recent call last):
[rank1]:   File "/soft/conda/lib/python3.11/site-packages/numpy/core/memmap.py", line 268, in __new__
[rank1]:     mm = mmap.mmap(fid.fileno(), bytes, access=acc, offset=start)
[rank1]: ValueError: mmap length is greater than file size
"""


def test_a_damaged_image_or_a_short_memmap_is_the_data() -> None:
    assert reason_of(_DIVA_TRUNCATED) == "dataloader_error"
    assert reason_of(_ALCF_MMAP) == "dataloader_error"


@pytest.mark.parametrize(
    "line",
    [
        "OSError: image file is truncated (22 bytes not processed)",
        "PIL.UnidentifiedImageError: cannot identify image file '/data/cc3m/00012/000123456.jpg'",
        "OSError: broken data stream when reading image file",
        "[rank1]: ValueError: mmap length is greater than file size",
        "ValueError: cannot mmap an empty file",
    ],
)
def test_unreadable_sample_wordings(line: str) -> None:
    assert reason_of(f'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n{line}') == (
        "dataloader_error"
    )


def test_an_io_error_stays_the_storages() -> None:
    # An errno says the storage failed, not the sample: the worker's re-raised I/O error keeps its rule.
    text = "OSError: Caught OSError in DataLoader worker process 2.\nOSError: [Errno 5] Input/output error"
    assert reason_of(text) == "storage_error"


# ---------------------------------------------------------------- tensors of one operation on two devices

# salesforce/LAVIS#68 (case 966): BLIP retrieval fine-tuned on 2 of 4 GPUs; the evaluation after the first
# epoch indexes a CPU tensor with CUDA indices. torch raises it, the script placed the tensors.
_LAVIS_INDICES = """
Evaluation:  [ 0/79]  eta: 0:04:11    time: 3.1830  data: 2.8841  max mem: 18211
Traceback (most recent call last):
  File "/mnt/data/LAVIS/train.py", line 100, in main
    runner.train()
  File "/mnt/data/LAVIS/lavis/runners/runner_base.py", line 360, in train
    val_log = self.eval_epoch(
  File "/mnt/data/BLIP/lib/python3.10/site-packages/torch/autograd/grad_mode.py", line 27, in decorate_context
    return func(*args, **kwargs)
RuntimeError: indices should be either on cpu or on the same device as the indexed tensor (cpu)
"""


def test_indices_on_another_device_are_the_scripts_placement() -> None:
    assert reason_of(_LAVIS_INDICES) == "script_error"


# ---------------------------------------------------------------- CUDA under Triton's launches

# databricks/megablocks#88 (case 969): moe_46m_8gpu.sh in the project's container stops on a Triton kernel
# launch that CUDA refused.
_MEGABLOCKS_TRITON = """
[before the start of training step] datetime: 2024-01-10 08:41:19
Traceback (most recent call last):
  File "/workspace/megablocks/third_party/Megatron-LM/megatron/training.py", line 707, in train
    train_step(forward_step_func,
RuntimeError: Triton Error [CUDA]: invalid argument
"""


def test_triton_errors_in_cuda_words_are_cuda_errors() -> None:
    assert reason_of(_MEGABLOCKS_TRITON) == "cuda_error"
    # torch's words for the driver API (triton-lang/triton#7967's title)
    assert reason_of("RuntimeError: CUDA driver error: invalid argument") == "cuda_error"
    # out of memory in the same words is the GPU's memory
    assert reason_of("RuntimeError: Triton Error [CUDA]: out of memory") == "gpu_oom"


# ---------------------------------------------------------------- whose code: Megatron's derivatives

# alibaba/Pai-Megatron-Patch#183 (case 975): continued pretraining of Mistral-7B with pipeline parallelism
# 2; the later stages reach the patch's attention-mask helper with no embeddings. The training framework's
# own bug (fixed upstream), run from a checkout rather than installed.
_PAI_MEGATRON = """
[before the start of training step] datetime: 2024-04-17 11:20:33
Traceback (most recent call last):
  File "/my_workspace/Pai-Megatron-Patch/megatron_patch/model/mistral/modeling_attn_mask_utils.py", line 198, in _prepare_4d_causal_attention_mask
    attention_mask, input_shape[-1], key_value_length, dtype=inputs_embeds.dtype
AttributeError: 'NoneType' object has no attribute 'dtype'
"""

# The same exception in the user's own script, with no framework frame: the script's.
_OWN_SCRIPT = """
Traceback (most recent call last):
  File "/my_workspace/pretrain.py", line 198, in build_mask
    attention_mask, input_shape[-1], key_value_length, dtype=inputs_embeds.dtype
AttributeError: 'NoneType' object has no attribute 'dtype'
"""


def test_megatron_patch_is_a_framework() -> None:
    assert reason_of(_PAI_MEGATRON) == "framework_error"
    assert reason_of(_OWN_SCRIPT) == "script_error"
