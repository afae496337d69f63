"""Classes of misses from issue 19's ninth round, batch A (corpus cases 845-880: vision, 3D, robotics,
audio, chemistry and biology projects): kills and crashes reported in other words (a French shell, gdb),
a CUDA kernel's assertion as Windows builds print it, device memory in wgpu's words, binaries built
without the GPU's architecture in spconv's and torch's words, Hydra refusing overrides or failing to
locate a target, exceptions written as their repr, a script's own check on the GPU count, torchrun
refusing its options, libraries refusing a value and naming the ones they support, collate errors outside
a worker, distributions whose parameters went NaN, and an attribute an application package's object
never had. Error messages are verbatim from the public reports named in each test; hosts, paths and pids
may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_of

# ---------------------------------------------------------------- kills and crashes in other words

# nerfstudio-project/nerfstudio#2016 (case 845): bash's "Killed" in a French locale, while the images are
# cached in host memory.
_NERFSTUDIO_FR_KILLED = """
           Skipping 0 files in dataset split val.                                           nerfstudio_dataparser.py:163
Setting up training dataset...
Caching all 373 images.
Processus arrêté
"""


def test_the_shells_kill_in_other_locales_is_host_memory() -> None:
    assert reason_of(_NERFSTUDIO_FR_KILLED) == "host_oom"
    assert reason_of(_NERFSTUDIO_FR_KILLED.replace("Processus arrêté", "Getötet")) == "host_oom"
    assert reason_of("train.sh: ligne 12: 48213 Processus arrêté        python train.py") == "host_oom"
    # the words inside a sentence are not the shell's report
    assert reason_of("Le processus arrêté par l'utilisateur a été relancé") == "unknown"


# Xiaoxun-Gong/DeepH-E3#1 (case 876): the run under gdb, which reports the segfault in its own words.
_DEEPH_GDB = """
(gdb) r ~/work/DeepH-E3/deephe3-train.py train.ini
Starting program: /home/user/anaconda3/envs/E3/bin/python ~/work/DeepH-E3/deephe3-train.py train.ini
[New Thread 0x7ffff2dff640 (LWP 64184)]

Thread 1 "python" received signal SIGSEGV, Segmentation fault.
0x00007fff8f400005 in c10::detail::infer_schema::(anonymous namespace)::createArgumentVector(c10::ArrayRef<c10::detail::infer_schema::ArgumentDef>) () from /home/user/anaconda3/envs/E3/lib/python3.9/site-packages/torch/lib/libtorch_cpu.so
"""


def test_a_crash_a_debugger_reports_is_a_native_crash() -> None:
    assert reason_of(_DEEPH_GDB) == "framework_error"
    assert reason_of("Program received signal SIGABRT, Aborted.") == "framework_error"


# meituan/YOLOv6#535 (case 865): a Windows build of torch names no kernel function before "block:", and
# the first assertion is glued to a tqdm bar.
_YOLOV6_WINDOWS_ASSERT = """
       5/9    0.5002         0     1.839:   0%|          | 0/1566 [00:00<?, ?it/
       5/9    0.5002         0     1.839:   0%|          | 1/1566 [00:00<10:14, C:\\cb\\pytorch_1000000000000\\work\\aten\\src\\ATen\\native\\cuda\\Loss.cu:115: block: [29,0,0], thread: [0,0,0] Assertion `input_val >= zero && input_val <= one` failed.
C:\\cb\\pytorch_1000000000000\\work\\aten\\src\\ATen\\native\\cuda\\Loss.cu:115: block: [29,0,0], thread: [1,0,0] Assertion `input_val >= zero && input_val <= one` failed.
"""


def test_a_kernel_assertion_without_the_kernels_name_is_the_device_side_assert() -> None:
    assert reason_of(_YOLOV6_WINDOWS_ASSERT) == "framework_error"


# ---------------------------------------------------------------- memory and builds in other libraries' words

# ArthurBrussee/brush#551 (case 853): a Rust trainer on wgpu panics in cubecl's allocator.
_BRUSH_RESERVE = """
thread 'DSD-4-0' (33548) panicked at C:\\Users\\user\\.cargo\\git\\checkouts\\cubecl-058c47895211d464\\359770b\\crates\\cubecl-wgpu\\src\\compute\\server.rs:347:35:
failed to reserve 3595479680 bytes of device memory: can't allocate buffer of size: 3595479680
No backtrace available

thread 'ui-process' (18716) panicked at crates\\brush-render\\src\\render.rs:174:18:
Failed to read counts: An error happened during execution
"""


def test_device_memory_that_a_gpu_api_cannot_reserve_is_gpu_oom() -> None:
    assert reason_of(_BRUSH_RESERVE) == "gpu_oom"


# SxJyJay/MSMDFusion#32 (case 879): a prebuilt spconv without the GPU's architecture; torch's own warning
# for a GPU newer than its build says the same.
_SPCONV_ARCH = """
[Exception|implicit_gemm]feat=torch.Size([290557, 96]),w=torch.Size([128, 3, 3, 3, 96]),pair=torch.Size([27, 131609]),act=131609,issubm=False,istrain=True
SPCONV_DEBUG_SAVE_PATH not found, you can specify SPCONV_DEBUG_SAVE_PATH as debug data save path to save debug data which can be attached in a issue.
[WARNING]your gpu arch (8, 9) isn't compiled in prebuilt, may cause invalid device function. available: {(7, 0), (6, 1), (8, 0), (6, 0), (7, 5), (8, 6), (5, 2)}
"""


def test_a_binary_built_without_the_gpus_architecture_is_an_installation() -> None:
    assert reason_of(_SPCONV_ARCH) == "import_error"
    torch_warning = (
        "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch installation."
    )
    assert reason_of(torch_warning) == "import_error"


# ---------------------------------------------------------------- Hydra

# facebookresearch/audiocraft#446 (case 847) and fishaudio/fish-speech#223 (case 869): overrides Hydra
# refuses before the job starts.
_DORA_OVERRIDE = """
    raise ConfigCompositionException(
hydra.errors.ConfigCompositionException: Could not override 'lr'.
To append to your config use +lr=0.01
"""
_FISH_LEXER = """
LexerNoViableAltException: train_dataset.filelist=E:\\tts\\fe735f8eb32b46d58954b6a336337bab76a8ca4740bd043ea11738e866e790f0~\\fish-speech\\data\\vq_train_filelist.txt

                                 ^
See https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


@pytest.mark.parametrize("text", [_DORA_OVERRIDE, _FISH_LEXER])
def test_overrides_hydra_refuses_are_the_options(text: str) -> None:
    assert reason_of(text) == "argument_error"


# robot-learning-freiburg/PointFlowMatch#7 (case 858): Hydra's instantiate writes the exception it caught
# as its repr; the call that does not fit its callee is the script's.
_HYDRA_CALL_TARGET = """
Error executing job with overrides: ['log_wandb=True', 'dataloader.num_workers=8', 'task_name=open_box']
Error in call to target 'diffusion_policy.model.diffusion.conditional_unet1d.ConditionalUnet1D':
TypeError("ConditionalUnet1D.__init__() got an unexpected keyword argument 'use_dropout'")
full_key: model.diffusion_net

Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


def test_an_exception_written_as_its_repr_is_read_as_one() -> None:
    assert reason_of(_HYDRA_CALL_TARGET) == "script_error"
    assert reason_of('RuntimeError("CUDA error: an illegal memory access was encountered")') == "cuda_error"
    # a call in code is not an exception's repr
    assert reason_of('    raise ValueError("batch size must be positive")') == "unknown"


# phineas-pta/speech-synthesis-ngngngan#3 (case 878): Hydra's _locate cannot resolve the target; the
# excerpt ends before Hydra's own "Error locating target".
_HYDRA_LOCATE = """
Traceback (most recent call last):
  File "C:\\Users\\user\\anaconda3\\envs\\matcha39\\lib\\site-packages\\hydra\\_internal\\utils.py", line 644, in _locate
    obj = getattr(obj, part)
AttributeError: module 'matcha.models' has no attribute 'matcha_tts'

During handling of the above exception, another exception occurred:
"""


def test_a_target_hydra_cannot_locate_is_an_import_error() -> None:
    assert reason_of(_HYDRA_LOCATE) == "import_error"
    elsewhere = _HYDRA_LOCATE.replace("in _locate", "in instantiate")
    assert reason_of(elsewhere) != "import_error"


# ---------------------------------------------------------------- the launch and the options

# FoundationVision/ByteTrack#174 (case 867): the script's own check that torch sees the GPUs asked for.
_BYTETRACK_GPU_COUNT = """
Traceback (most recent call last):
  File "tools/train.py", line 112, in <module>
    assert num_gpu <= torch.cuda.device_count()
AssertionError
"""


def test_a_scripts_assertion_on_the_gpu_count_is_the_launch() -> None:
    assert reason_of(_BYTETRACK_GPU_COUNT) == "argument_error"
    other = _BYTETRACK_GPU_COUNT.replace("num_gpu <= torch.cuda.device_count()", "len(batch) == num_gpu")
    assert reason_of(other) == "script_error"


# thangvubk/SoftGroup#56 (case 880): torchrun's error handler records its own refusal in JSON.
_TORCHRUN_NPROC = """
ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{
  "message": {
    "message": "ValueError: Unsupported nproc_per_node value: --skip_validate",
    "extraInfo": {
"""


def test_torchrun_refusing_its_own_option_is_the_launch() -> None:
    assert reason_of(_TORCHRUN_NPROC) == "argument_error"


# mani-skill/ManiSkill#79 (case 874): a library refusing an option and listing the ones it supports.
_MANISKILL_MODES = """
AssertionError: pd_joint_delta_pos not in supported modes: ['base_pd_joint_vel_arm_pd_joint_vel',
'base_pd_joint_vel_arm_pd_joint_delta_pos', 'base_pd_joint_vel_arm_pd_joint_pos']
"""


def test_a_value_not_in_the_supported_list_is_the_options() -> None:
    assert reason_of(_MANISKILL_MODES) == "argument_error"


# ---------------------------------------------------------------- data, divergence and whose code

# huggingface/transformers#15823 (case 856): the Trainer's DataLoader in the main process; Databricks
# prints the message above the notebook's traceback.
_TROCR_COLLATE = """
RuntimeError: stack expects each tensor to be equal size, but got [128] at entry 0 and [152] at entry 3
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
<command-2931901844376276> in <module>
---> 13 training_results = trainer.train()
"""


def test_a_collate_error_outside_a_worker_is_the_data() -> None:
    assert reason_of(_TROCR_COLLATE) == "dataloader_error"


# unitreerobotics/unitree_rl_lab#24 (case 861): after 4 hours of PPO the policy's std is no number.
_RSL_RL_STD = """
  File "/home/filippo/env_isaaclab/lib/python3.10/site-packages/rsl_rl/modules/actor_critic.py", line 124, in act
    return self.distribution.sample()
  File "/home/filippo/env_isaaclab/lib/python3.10/site-packages/torch/distributions/normal.py", line 73, in sample
    return torch.normal(self.loc.expand(shape), self.scale.expand(shape))
RuntimeError: normal expects all elements of std >= 0.0
"""


def test_distribution_parameters_that_went_nan_are_divergence() -> None:
    assert reason_of(_RSL_RL_STD) == "loss_divergence"
    assert (
        reason_of("RuntimeError: probability tensor contains either `inf`, `nan` or element < 0") == "loss_divergence"
    )


# isl-org/Open3D-ML#598 (case 873): an attribute the pipeline object never had, raised in an installed
# application package; the same wording inside torch stays the framework's.
_OPEN3D_CFG_TB = """
Traceback (most recent call last):
  File "main.py", line 13, in <module>
    pipeline.run_train()
  File "/home/user/.local/lib/python3.8/site-packages/open3d/_ml3d/torch/pipelines/semantic_segmentation.py", line 559, in save_config
    writer.add_text("Description/Open3D-ML", self.cfg_tb['readme'], 0)
AttributeError: 'SemanticSegmentation' object has no attribute 'cfg_tb'
"""


def test_an_attribute_an_application_packages_object_never_had_is_the_scripts() -> None:
    assert reason_of(_OPEN3D_CFG_TB) == "script_error"
    in_torch = _OPEN3D_CFG_TB.replace("site-packages/open3d/_ml3d/torch/pipelines", "site-packages/torch/nn/modules")
    assert reason_of(in_torch) == "framework_error"


# ---------------------------------------------------------------- measured after the fixes (cases 881-882)

# google-research/multinerf#139 (case 881): XLA's CUDA-graph command buffer fails after ~300 iterations;
# a second reporter in the thread saw the capture's status instead.
_MULTINERF_GRAPH = """
  300/250000: loss=0.01398, psnr=22.087, lr=1.99e-03 | data=0.01251, dist=5.1e-05, 15791 r/s
INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.graph.launch' failed: Failed to update gpu graph: Graph update result=kNodeTypeChanged: Failed to update CUDA graph: CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: the graph update was not performed because it included changes which violated constraints specific to instantiated graph update; current profiling annotation: XlaModule:#hlo_module=pmap_train_step,program_id=237#.
"""
_MULTINERF_CAPTURE = "ValueError: INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.graph.launch' failed: CaptureGpuGraph failed (the requested functionality is not supported; current tracing scope: custom-call.119): INTERNAL: Failed to end stream capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: operation failed due to a previous error during capture; current profiling annotation: XlaModule:#hlo_module=jit_body_fn,program_id=214#."


@pytest.mark.parametrize("text", [_MULTINERF_GRAPH, _MULTINERF_CAPTURE])
def test_a_cuda_graphs_driver_status_is_a_cuda_error(text: str) -> None:
    assert reason_of(text) == "cuda_error"
