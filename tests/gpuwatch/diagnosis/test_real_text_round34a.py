"""Classes of misses from issue 19's thirty-fourth round (corpus cases 2102-2119, dense retrieval and LLM
pruning: Pyserini, RocketQA, ColBERT, OpenMatch, DPR, Torch-Pruning, LLM-Pruner, Wanda, SliceGPT, NNI, tfmot;
2122-2138, autoregressive image generation and diffusion personalization: DreamBooth trainers, Custom Diffusion,
IP-Adapter, ControlVAR, DALLE-pytorch, DreamArtist, EasyPhoto): a framework's checkout named with dashes, a torch
kernel missing for a dtype quoted without its exception's name, a folder named by its role said missing, and
a device list indexed past the visible GPUs. Error messages are verbatim from the public reports named in each
test; hosts, paths and pids may be made up."""

from __future__ import annotations

from gpuwatch.diagnosis.rules import Frameworks
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# VainF/Torch-Pruning#455 (case 2108): the library run from its clone in Colab.
_CHECKOUT_DASHES = """
Traceback (most recent call last):
  File "/content/prune_llm.py", line 312, in main
    pruner = tp.pruner.MetaPruner(
  File "/content/Torch-Pruning/torch_pruning/dependency.py", line 799, in _trace
    module2node, o.grad_fn, gradfn2module, reused, visited=visited)
                 ^^^^^^^^^
AttributeError: 'tuple' object has no attribute 'grad_fn'
"""

# horseee/LLM-Pruner#22 (case 2111).
_KERNEL_DTYPE = """\"addmm_impl_cpu_\" not implemented for 'Half'\n"""

# TheLastBen/fast-stable-diffusion#1673 (case 2122) and huggingface/autotrain-advanced#811 (case 2136).
_ROOT_MISSING = """
  File "/usr/local/lib/python3.10/dist-packages/autotrain/trainers/dreambooth/train_xl.py", line 184, in __init__
    raise ValueError("Instance images root doesn't exists.")
ValueError: Instance images root doesn't exists.
"""

# PaddlePaddle/RocketQA#47 (case 2103): the report cut the last frame's line; the raising line is kept.
_DEVICE_LIST = """
Traceback (most recent call last):
  File "/root/anaconda3/lib/python3.9/site-packages/rocketqa/rocketqa.py", line 122, in load_
    encoder = CrossEncoder(**encoder_conf)
  File "/root/anaconda3/lib/python3.9/site-packages/rocketqa/encoder/cross_encoder.py", line
    place = dev_list[device_id]
IndexError: list index out of range
"""


def test_a_framework_run_from_a_checkout_named_with_dashes_is_the_framework() -> None:
    frameworks = Frameworks(packages=["torch*", "flair"], paths=[])
    assert frameworks.path("/content/Torch-Pruning/torch_pruning/dependency.py")
    assert frameworks.path("/root/flair-master/flair/models/sequence_tagger_model.py")
    # a framework vendored under another name is the project's (case 816), and a name that only looks alike
    assert not frameworks.path("/home/u/crowd-counting/torch_pruning/dependency.py")
    assert not frameworks.path("/home/u/Torch-Pruner/torch_pruning/dependency.py")
    assert reason_of(_CHECKOUT_DASHES) == "framework_error"


def test_a_kernel_missing_for_a_dtype_is_the_framework_s_with_or_without_its_type() -> None:
    assert reason_and_rule(_KERNEL_DTYPE) == ("framework_error", "kernel-dtype-not-implemented")
    assert reason_of("RuntimeError: " + _KERNEL_DTYPE) == "framework_error"


def test_a_folder_named_by_its_role_said_missing_is_a_missing_file() -> None:
    assert reason_and_rule(_ROOT_MISSING) == ("file_not_found", "file-not-found-in-message")
    assert reason_of("ValueError: Class images folder does not exist\n") == "file_not_found"
    # the word alone, not about a path, is not one
    assert reason_of("ValueError: the key does not exist in the mapping\n") != "file_not_found"


def test_a_device_list_indexed_by_the_requested_device_is_the_launch_s() -> None:
    assert reason_and_rule(_DEVICE_LIST) == ("argument_error", "device-list-index")
    # another list indexed by another name is not
    assert reason_of(_DEVICE_LIST.replace("dev_list[device_id]", "samples[idx]")) != "argument_error"
