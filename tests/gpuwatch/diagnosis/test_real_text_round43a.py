"""Classes of misses from issue 19's rounds forty-three to forty-five (corpus cases 2449-2470: contrastive
vision-language training and pose estimation; 2479-2482: reward fine-tuning of diffusion models and agent
fine-tuning; 2509 on: geospatial foundation models and medical image segmentation). Error messages are verbatim
from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# OFA-Sys/Chinese-CLIP#159 (case 2453).
_PINNED = "RuntimeError: cuda runtime error (2) : out of memory at /workspace/artifacts/paipytorch1.8/dist/ubuntu18.04-py3.6-cuda10.1/build/src/aten/src/THC/THCCachingHostAllocator.cpp:301\n"


def test_pinned_host_memory_the_cuda_host_allocator_could_not_get_is_the_host_s() -> None:
    assert reason_and_rule(_PINNED) == ("host_oom", "host-allocator")
    # the device allocator's out of memory stays the GPU's
    device = (
        "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510\n"
    )
    assert reason_and_rule(device) == ("gpu_oom", "cuda-library-oom")
    assert (
        reason_of(
            "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingHostAllocator.cpp line=265 error=2 : out of memory\n"
        )
        == "host_oom"
    )


# openpifpaf/openpifpaf#170 (case 2457): cut after the assert statement of OpenPifPaf's loss, run from its checkout.
_PIFPAF = """
  File "/home/user/miniconda/envs/py36/lib/python3.6/site-packages/torch/nn/modules/module.py", line 541, in __call__
    result = self.forward(*input, **kwargs)
  File "../openpifpaf/openpifpaf/network/losses.py", line 228, in forward
    assert len(x) == 1 + 2 * self.n_vectors + self.n_scales
"""


def test_a_pose_framework_s_own_assertion_from_its_checkout_is_the_framework_s() -> None:
    assert reason_of(_PIFPAF) == "framework_error"


# torchgeo/torchgeo#89 (case 2510): the worker's own traceback, receiving its index.
_WORKER_RECEIVE = """
Process Process-1:
Traceback (most recent call last):
  File "/anaconda/envs/azureml_py38/lib/python3.9/multiprocessing/process.py", line 315, in _bootstrap
    self.run()
  File "/anaconda/envs/azureml_py38/lib/python3.9/site-packages/torch/utils/data/_utils/worker.py", line 260, in _worker_loop
    r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
  File "/anaconda/envs/azureml_py38/lib/python3.9/multiprocessing/queues.py", line 122, in get
    return _ForkingPickler.loads(res)
TypeError: __new__() missing 5 required positional arguments: 'maxx', 'miny', 'maxy', 'mint', and 'maxt'
"""


def test_a_worker_that_cannot_receive_its_task_is_the_data_pipeline_s() -> None:
    assert reason_and_rule(_WORKER_RECEIVE) == ("dataloader_error", "loader-worker-receive")
    # the same call mismatch in the run's own code stays the script's
    own = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    box = BoundingBox()\nTypeError: __new__() missing 5 required positional arguments: 'maxx', 'miny', 'maxy', 'mint', and 'maxt'\n"
    assert reason_of(own) == "script_error"


# Amshaker/unetr_plus_plus#48 (case 2519) and datapink/robosat.pink#93 (case 2514): the title's error under the frames.
_UNTYPED = [
    (
        """
Traceback (most recent call last):
  File "C:\\Project\\unetr_pp\\unetr_pp\\training\\network_training\\unetr_pp_trainer_synapse.py", line 285, in run_iteration
    output = self.network(data)
  File "C:\\Monai\\envs\\unetr_pp\\lib\\site-packages\\torch\\nn\\modules\\module.py", line 1110, in _call_impl
    return forward_call(*input, **kwargs)
  File "C:\\Project\\unetr_pp\\unetr_pp\\network_architecture\\synapse\\unetr_pp_synapse.py", line 134, in forward
    x_output, hidden_states = self.unetr_pp_encoder(x_in)
The size of tensor a (76800) must match the size of tensor b (32768) at non-singleton dimension 1
""",
        "script_error",
    ),
    (
        """
-- Process 2 terminated with the following error:
Traceback (most recent call last):
  File "/home/cj/miniconda3/envs/rsp_env5/lib/python3.7/site-packages/robosat_pink/tools/train.py", line 293, in _do_epoch
    loss.backward()
  File "/home/cj/miniconda3/envs/rsp_env5/lib/python3.7/site-packages/torch/tensor.py", line 118, in backward
    torch.autograd.backward(self, gradient, retain_graph, create_graph)
Function MulBackward0 returned an invalid gradient at index 0
""",
        "framework_error",
    ),
]


@pytest.mark.parametrize(("text", "reason", "goes_on"), [(*_UNTYPED[0], "unknown"), (*_UNTYPED[1], "framework_error")])
def test_a_sentence_ending_the_excerpt_under_the_last_frame_is_its_exception(
    text: str, reason: str, goes_on: str
) -> None:
    assert reason_of(text) == reason
    # a log line after a cut traceback is not taken for its exception when the log goes on; autograd's own wording
    # ("returned an invalid gradient"), which a rule knows since rounds 114-118 (autograd-invalid-gradient), is read
    # by that rule wherever it stands
    assert reason_of(text + "Epoch 3 started on all ranks\n" + "Saving checkpoint to disk\n") == goes_on


# MIC-DKFZ/nnUNet#1645 (case 2524): nnU-Net v2 from its checkout.
_NNUNET = """
Traceback (most recent call last):
  File "/home/project/nnUNetV2/nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py", line 1000, in on_validation_epoch_end
    self.logger.log('mean_fg_dice', mean_fg_dice, self.current_epoch)
  File "/home/project/nnUNetV2/nnunetv2/training/logging/nnunet_logger.py", line 50, in log
    new_ema_pseudo_dice = self.my_fantastic_logging['ema_fg_dice'][epoch - 1] * 0.9 + 0.1 * value \\
IndexError: list index out of range
"""

# MIC-DKFZ/nnUNet#2447 (case 2528): a general-purpose library's own None bug.
_THREADPOOLCTL = """
Traceback (most recent call last):
  File "C:\\Users\\u\\anaconda3\\Lib\\site-packages\\nnunetv2\\training\\dataloading\\data_loader_3d.py", line 30, in generate_train_batch
    with threadpool_limits(limits=1, user_api=None):
  File "C:\\Users\\u\\anaconda3\\Lib\\site-packages\\threadpoolctl.py", line 1046, in _get_version
    config = get_config().split()
AttributeError: 'NoneType' object has no attribute 'split'
"""


@pytest.mark.parametrize("text", [_NNUNET, _THREADPOOLCTL])
def test_a_medical_framework_s_or_a_library_s_own_bug_is_theirs(text: str) -> None:
    assert reason_of(text) == "framework_error"


def test_nnunet_and_argparse_refusals_are_the_command_line_s() -> None:
    # Project-MONAI/MONAI#8237 (case 2525): argparse's error with no program name before it
    assert reason_and_rule("error: unrecognized arguments: True\n") == ("argument_error", "argparse")
    # MIC-DKFZ/nnUNet#2070 (case 2526)
    trainer = "RuntimeError: Could not find requested nnunet trainer nnUNetTrainer2 in nnunetv2.training.nnUNetTrainer (/home/wu/.conda/envs/nnUNet/lib/python3.9/site-packages/nnunetv2/training/nnUNetTrainer). If it is located somewhere else, please move it there.\n"
    assert reason_and_rule(trainer) == ("argument_error", "unknown-named-choice")
    assert reason_and_rule("KeyError: 'CLASS_CENTER_FEA_INIT is not a valid config key'\n") == (
        "argument_error",
        "unknown-named-choice",
    )


# MIC-DKFZ/nnUNet#1437 (case 2529).
def test_batchgenerators_workers_no_longer_alive_are_the_data_pipeline_s() -> None:
    text = "RuntimeError: One or more background workers are no longer alive. Exiting. Please check the print statements above for the actual error message\n"
    assert reason_and_rule(text) == ("dataloader_error", "dataloader")


def test_a_view_of_the_wrong_size_is_judged_by_its_caller() -> None:
    # charlesq34/pointnet2 port (case 1136): the line alone is the caller's
    assert reason_and_rule("RuntimeError: shape '[-1, 2064, 1]' is invalid for input of size 4098\n") == (
        "script_error",
        "layer-input-shape",
    )
    # urchade/GLiNER (case 1939): asked by a framework's forward under DataParallel, the framework's
    gliner = """
Original Traceback (most recent call last):
  File "/home/user/.local/lib/python3.10/site-packages/torch/nn/parallel/parallel_apply.py", line 83, in _worker
    output = module(*input, **kwargs)
  File "/home/user/.local/lib/python3.10/site-packages/gliner/model.py", line 103, in forward
    output = self.model(*args, **kwargs)
  File "/home/user/.local/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1553, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
RuntimeError: shape '[8, 129, 12, 512]' is invalid for input of size 8306688
"""
    assert reason_of(gliner) == "framework_error"
