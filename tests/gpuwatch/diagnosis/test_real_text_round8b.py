"""Classes of misses from issue 19's eighth round, batch B (corpus cases 815-844: vision, speech, RL,
science and GPU-infrastructure projects): native crashes that a shell, a launcher or glog reports in other
words (a bare SIGFPE, a Chinese locale, Windows' NTSTATUS codes, a failed status check), frameworks that see
fewer GPUs than asked for in Keras' words, layer inputs of the wrong shape, a CUDA kernel's assertion from
a lambda, device allocators that throw std::bad_alloc, other launchers' environment variables, Hydra's
unimportable target, and a NaN loss that only a progress bar's postfix shows. Error messages are verbatim
from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_of

# ---------------------------------------------------------------- native crashes in other words

# NVlabs/nvdiffrec#17 (case 842): pass 1 writes its mesh, pass 2 dies of SIGFPE; an interactive shell
# says it without a script name or line number.
_NVDIFFREC_SIGFPE = """
iter= 5000, img_loss=0.031455, reg_loss=0.001180, lr=0.00300, time=409.9 ms, rem=0.00 s
Base mesh has 81238 triangles and 40612 vertices.
Writing mesh:  out/hushoushuang/dmtet_mesh/mesh.obj
Done exporting mesh
Floating point exception (core dumped)
"""

# MVIG-SJTU/AlphaPose#702 (case 844): bash's job report in a Chinese locale ("line 8: ... Segmentation
# fault (core dumped)").
_ALPHAPOSE_ZH_SEGFAULT = """
############# Starting Epoch 0 | LR: 0.001 #############
loss: 0.00211818 | acc: 0.1203:   3%|▎         | 302/9352 [01:51<55:24,  2.72it/s]
./scripts/train.sh: 行 8: 32488 段错误               (吐核)python ./scripts/train.py --exp-id ${EXPID} --cfg ${CONFIG}
"""

# RVC-Boss/GPT-SoVITS#2282 (case 819): Windows ends the trainer with NTSTATUS 0xC0000094 (integer divide
# by zero); mp.spawn only relays the exit code.
_SOVITS_NTSTATUS = """
start training from epoch 1
  0%|                                                                                       | 0/156 [00:00<?, ?it/s]Traceback (most recent call last):
  File "D:\\GPT-SoVITS-v3\\GPT_SoVITS\\s2_train_v3_lora.py", line 57, in main
    mp.spawn(
  File "D:\\GPT-SoVITS-v3\\runtime\\lib\\site-packages\\torch\\multiprocessing\\spawn.py", line 149, in join
    raise ProcessExitedException(
torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with exit code 3221225620
"""

# MIT-REALM/gcbfplus#11 (case 822): XLA's autotuner checks a status with glog's fatal line; the PTX
# assembler crashed, the process aborts.
_XLA_NON_OK_STATUS = """
  0%|          | 0/1000 [00:00<?, ?it/s]2025-05-07 04:12:51.081317: F external/xla/xla/service/gpu/autotuning/gemm_fusion_autotuner.cc:1099] Non-OK-status: executable.status()
Status: INTERNAL: ptxas exited with non-zero error code 139, output:
 - Failure occurred when compiling fusion gemm_fusion_dot.610 with config '{block_m:128,block_n:32,block_k:32,split_k:1,num_stages:4,num_warps:4,num_ctas:1}'
Aborted (core dumped)
"""


@pytest.mark.parametrize("text", [_NVDIFFREC_SIGFPE, _ALPHAPOSE_ZH_SEGFAULT, _SOVITS_NTSTATUS, _XLA_NON_OK_STATUS])
def test_native_crashes_reported_in_other_words_are_framework_errors(text: str) -> None:
    assert reason_of(text) == "framework_error"


def test_windows_interrupt_status_is_not_a_crash() -> None:
    """STATUS_CONTROL_C_EXIT (0xC000013A) is a Ctrl-C, not a crash: mp.spawn's relay stays a weak wrapper."""
    interrupted = _SOVITS_NTSTATUS.replace("3221225620", "3221225786")
    assert reason_of(interrupted) == "script_error"


def test_a_glog_status_check_that_names_a_known_cause_is_left_to_it() -> None:
    oom = "F external/xla/xla/pjrt/gpu/se_gpu_pjrt_client.cc:521] Non-OK-status: GpuAllocator(...) status: Internal: out of memory"
    assert reason_of(oom) == "gpu_oom"


# ---------------------------------------------------------------- more GPUs asked for than the framework sees

# keras-team/keras#8213 (case 823) and deepfakes/faceswap#948 (case 828): TensorFlow sees no GPU at all.
_KERAS_NO_GPU = """
Traceback (most recent call last):
  File "train.py", line 96, in <module>
    parallel_model = multi_gpu_model(model, gpus=2)
  File "/home/caiya/.local/lib/python3.5/site-packages/keras/utils/multi_gpu_utils.py", line 184, in multi_gpu_model
    available_devices))
ValueError: To call `multi_gpu_model` with `gpus=2`, we expect the following devices to be available: ['/cpu:0', '/gpu:0', '/gpu:1']. However this machine only has: ['/cpu:0', '/xla_cpu:0']. Try reducing `gpus`.
"""


def test_keras_that_sees_no_gpu_is_an_installation_and_fewer_gpus_the_request() -> None:
    assert reason_of(_KERAS_NO_GPU) == "import_error"
    only_cpu = _KERAS_NO_GPU.replace("['/cpu:0', '/xla_cpu:0']", "['/cpu:0']")
    assert reason_of(only_cpu) == "import_error"
    one_gpu = _KERAS_NO_GPU.replace("['/cpu:0', '/xla_cpu:0']", "['/cpu:0', '/gpu:0']")
    assert reason_of(one_gpu) == "argument_error"


# ---------------------------------------------------------------- a layer's input of the wrong shape


@pytest.mark.parametrize(
    "line",
    [
        # yl4579/StyleTTS2#273 (case 826): a 4-D tensor handed to a conv1d
        "RuntimeError: Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: [1, 1, 1, 800]",
        # JarodMica/StyleTTS-WebUI#46 (case 827): a 531-token sample for a model with 512 positions
        "RuntimeError: The expanded size of the tensor (531) must match the existing size (512) at non-singleton dimension 1.  Target sizes: [2, 531].  Tensor sizes: [1, 512]",
    ],
)
def test_a_layer_input_of_the_wrong_shape_is_the_scripts(line: str) -> None:
    in_torch = (
        "Traceback (most recent call last):\n"
        '  File "/home/fungus/StyleTTS2/train_first.py", line 375, in main\n'
        "    s = model.style_encoder(gt.unsqueeze(1))\n"
        '  File "/home/fungus/.local/lib/python3.10/site-packages/torch/nn/modules/conv.py", line 306, in _conv_forward\n'
        "    return F.conv1d(input, weight, bias, self.stride,\n" + line
    )
    assert reason_of(line) == "script_error"
    assert reason_of(in_torch) == "script_error"


# ---------------------------------------------------------------- a CUDA kernel's assertion from a lambda


def test_a_kernel_assertion_from_a_lambda_is_the_device_side_assert() -> None:
    """Deci-AI/super-gradients#1105 (case 832): the kernel is named "operator()", and a bar's residue
    starts the first line; torch's "device-side assert triggered" is not in the excerpt."""
    text = """
Train epoch 0:   0%|          | 0/31 [00:00<?, ?it/s]../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [56,0,0], thread: [64,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index out of bounds"` failed.
../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [56,0,0], thread: [65,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index out of bounds"` failed.
"""
    assert reason_of(text) == "framework_error"


# ---------------------------------------------------------------- device allocators that throw std::bad_alloc


def test_a_device_allocators_bad_alloc_is_the_gpus_memory() -> None:
    """NVIDIA/MinkowskiEngine#288 (case 836): thrust's CUDA backend failing its scratch allocation throws
    std::bad_alloc; the host allocator's own bad_alloc stays host memory."""
    thrust = """
  File "/usr/local/lib/python3.6/dist-packages/MinkowskiEngine-0.5.0-py3.6-linux-x86_64.egg/MinkowskiEngine/MinkowskiConvolution.py", line 84, in forward
    coordinate_manager._manager,
MemoryError: std::bad_alloc: temporary_buffer::allocate: get_temporary_buffer failed
"""
    assert reason_of(thrust) == "gpu_oom"
    # yuvalH9/UMERegRobust#6 (case 840): the CUDA status inside the bad_alloc
    assert reason_of("MemoryError: std::bad_alloc: cudaErrorMemoryAllocation: out of memory") == "gpu_oom"
    assert (
        reason_of("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc")
        == "host_oom"
    )


# ---------------------------------------------------------------- other launchers' environment variables


def test_a_launchers_variable_missing_from_the_environment_is_the_launch() -> None:
    """mit-han-lab/bevfusion#240 (case 815): tools/train.py run with python, not 'torchpack dist-run'."""
    text = """
Traceback (most recent call last):
  File "/home/yhqian/archives/bevfusion/tools/train.py", line 24, in main
    dist.init()
  File "/home/yhqian/anaconda3/envs/BEVFusionEnv/lib/python3.8/site-packages/torchpack/distributed/context.py", line 23, in init
    master_host = 'tcp://' + os.environ['MASTER_HOST']
  File "/home/yhqian/anaconda3/envs/BEVFusionEnv/lib/python3.8/os.py", line 673, in __getitem__
    raise KeyError(key) from None
KeyError: 'MASTER_HOST'
"""
    assert reason_of(text) == "argument_error"
    assert reason_of(text.replace("MASTER_HOST", "SLURM_PROCID")) == "argument_error"
    assert reason_of(text.replace("'MASTER_HOST'", "'learning_rate'")) != "argument_error"


# ---------------------------------------------------------------- Hydra's target that does not import


def test_hydras_target_that_does_not_import_is_an_import_error() -> None:
    """Eclectic-Sheep/sheeprl#218 (case 834): Hydra hides the ImportError in its chained exception; the
    log level's "Error" prefix is stripped before the rules see the line."""
    text = """
Seed set to 5
Error executing job with overrides: ['exp=dreamer_v3_XL_crafter', 'fabric.accelerator=cuda']
Error locating target 'sheeprl.envs.crafter.CrafterWrapper', set env var HYDRA_FULL_ERROR=1 to see chained exception.

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""
    assert reason_of(text) == "import_error"


# ---------------------------------------------------------------- a NaN loss in a progress bar's postfix

# Deci-AI/super-gradients#1081 (case 831): only the bar's postfix shows the loss, and it turns to nan.
_YOLO_NAS_BARS = """
Train epoch 0:  78%|███████▊  | 77284/99420 [78:25:29<15:56:01,  2.59s/it, PPYoloELoss/loss=1.59, PPYoloELoss/loss_cls=0.757, PPYoloELoss/loss_dfl=0.738, PPYoloELoss/loss_iou=0.185, gpu_mem=9.02]
Train epoch 0:  78%|███████▊  | 77291/99420 [78:25:34<6:46:42,  1.10s/it, PPYoloELoss/loss=nan, PPYoloELoss/loss_cls=nan, PPYoloELoss/loss_dfl=nan, PPYoloELoss/loss_iou=nan, gpu_mem=9.02]
Train epoch 0:  78%|███████▊  | 77402/99420 [78:27:36<6:43:10,  1.10s/it, PPYoloELoss/loss=nan, PPYoloELoss/loss_cls=nan, PPYoloELoss/loss_dfl=nan, PPYoloELoss/loss_iou=nan, gpu_mem=9.02]
"""


def test_a_nan_loss_in_a_bars_postfix_is_divergence() -> None:
    assert reason_of(_YOLO_NAS_BARS) == "loss_divergence"
    finite = _YOLO_NAS_BARS.replace("=nan", "=1.58")
    assert reason_of(finite) == "unknown"


def test_a_bar_reads_as_its_postfix_only_when_nothing_is_glued_after_it() -> None:
    bar = (
        "Train epoch 0:  78%|███████▊  | 77291/99420 [78:25:34<6:46:42,  1.10s/it, PPYoloELoss/loss=nan, gpu_mem=9.02]"
    )
    assert normalize(bar)[0] == "PPYoloELoss/loss=nan, gpu_mem=9.02"
    assert normalize(" 10%|█         | 10/100 [00:01<00:09,  9.50it/s]")[0] == ""
    glued = "Epoch 3:  41%|████      | 2011/4900 [31:12<44:50,  1.07it/s, loss=0.611]Traceback (most recent call last):"
    assert normalize(glued)[0] == "Traceback (most recent call last):"
