"""Classes of misses from issue 19's rounds one hundred to one hundred and two (corpus cases 4201-4223, 4231-4253 and
4261-4283: reports on Hugging Face fine-tuning, reinforcement-learning training and graph, recommender and tabular
training on GPUs taken as the search returned them). Error messages are verbatim from the public reports named in each
test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # huggingface/peft#951 (case 4207): DDP's reducer and parameters that got no gradient
        (
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.\nParameter indices which did not receive grad for rank 0: 72 73\n",
            "framework_error",
            "ddp-unfinished-reduction",
        ),
        # rubentea16/indo-bert-news-classification#1 (case 4211): an iterable dataset without a step count
        (
            "ValueError: train_dataset does not implement __len__, max_steps has to be specified\n",
            "argument_error",
            "trainer-max-steps-required",
        ),
        # huggingface/transformers#17875 (case 4216): ragged sequences collated into one tensor
        (
            "  ...\nValueError: expected sequence of length 1024 at dim 1 (got 1012)\n",
            "dataloader_error",
            "collate-ragged-sequences",
        ),
        # oliverguhr/fullstop-deep-punctuation-prediction#9 (case 4209): the script's own handler
        ("Unexpected error: <class 'AttributeError'>\n", "script_error", "script-handler-unexpected-error"),
        # huggingface/trl#1349 (case 4217): peft's name used by trl without peft installed
        (
            "    peft_config = LoraConfig(\nNameError: name 'LoraConfig' is not defined. Did you mean: 'ModelConfig'?\n",
            "import_error",
            "optional-import-name",
        ),
        # huggingface/accelerate#1993 (case 4220): NCCL's forced graph naming a device, quoted without its prefix
        ("XML Import Channel : dev 3 not found.\n", "argument_error", "nccl-graph-file-device-missing"),
        # tloen/alpaca-lora#3 (case 4206): DataParallel finding a module spread over GPUs by device_map
        (
            "RuntimeError: module must have its parameters and buffers on device cuda:0 (device_ids[0]) but found one of them on device: cuda:1\n",
            "script_error",
            "device-mismatch",
        ),
    ],
)
def test_fine_tuning_in_the_trainers_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # ray-project/ray#17653 (case 4240): RLlib's towers running cuDNN's RNN backward in eval mode
        (
            "ValueError: cudnn RNN backward can only be called in training mode In tower 0 on device cuda:0\n",
            "framework_error",
            "cudnn-rnn-backward-eval-mode",
        ),
        # ray-project/ray#34778 (case 4241): an optimizer's scalars placed on the GPU
        ("RuntimeError: Expected scalars to be on CPU, got cuda:0 instead.\n", "script_error", "device-mismatch"),
        # ray-project/ray#8473 (case 4251): Ray's memory monitor stopping a trial
        (
            "ray.exceptions.RayTaskError(RayOutOfMemoryError): ray::PPO (pid=448, ip=172.20.1.205)\n",
            "host_oom",
            "kernel-oom-killer",
        ),
        # isaac-sim/IsaacLab#1460 (case 4242): PhysX's GPU narrowphase failing with CUDA's 700
        (
            "2024-11-25 09:13:08 [11,526ms] [Error] [omni.physx.plugin] PhysX error: Synchronizing GPU Narrowphase failed! 700\n",
            "cuda_error",
            "physx-cuda-fault",
        ),
        # isaac-sim/IsaacLab#2892 (case 4243): Isaac Sim's crash reporter, a native crash
        (
            "2025-07-10T12:34:05Z [3,811ms] [Fatal] [carb.crashreporter-breakpad.plugin] 203: libpython3.11.so.1.0!_PyEval_EvalFrameDefault+0x6cae\n",
            "framework_error",
            "omniverse-crash-reporter",
        ),
        # unitreerobotics/unitree_rl_gym#48 (case 4244): Isaac Gym without the CUDA driver library
        (
            "*** Warning: failed to preload CUDA lib\n*** Warning: failed to preload PhysX libs\n[Error] [carb.gym.plugin] Gym cuda error: invalid resource handle\n",
            "import_error",
            "isaacgym-cuda-lib-not-loaded",
        ),
    ],
)
def test_reinforcement_learning_and_simulators(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # dmlc/dgl#1021 (case 4261): DGL's CPU build asked for the GPU
        (
            "dgl._ffi.base.DGLError: /opt/dgl/src/runtime/c_runtime_api.cc:87: Check failed: allow_missing: Device API gpu is not enabled\n",
            "import_error",
            "gpu-backend-not-built",
        ),
        # lightgbm-org/LightGBM#532 (case 4273): LightGBM's GPU build with no OpenCL device
        ("Met Exceptions:\nNo OpenCL device found\n", "import_error", "gpu-backend-not-built"),
        # meta-recsys/generative-recommenders#35 and pytorch/FBGEMM#1847 (cases 4279, 4280): fbgemm_gpu's operators missing
        (
            "AttributeError: '_OpNamespace' 'fbgemm' object has no attribute 'jagged_2d_to_dense'\n",
            "import_error",
            "gpu-backend-not-built",
        ),
        (
            "NotImplementedError: Could not run 'fbgemm::block_bucketize_sparse_features' with arguments from the 'CUDA' backend\n",
            "import_error",
            "gpu-backend-not-built",
        ),
        # lightgbm-org/LightGBM#6811 and dmlc/xgboost#4245 (cases 4274, 4271): CUDA's invalid argument in the libraries' words
        ("lightgbm.basic.LightGBMError: [CUDA] invalid argument\n", "cuda_error", "cuda-library-status"),
        (
            "xgboost.core.XGBoostError: b'[23:05:47] /workspace/src/tree/updater_gpu_hist.cu:908: Exception in gpu_hist: /workspace/src/tree/updater_gpu_hist.cu: 279: invalid argument\n",
            "cuda_error",
            "cuda-library-status",
        ),
        # pyg-team/pytorch_geometric#860 (case 4266): a device-side assert reported by thrust's copy_if
        (
            "RuntimeError: copy_if failed to synchronize: cudaErrorAssert: device-side assert triggered\n",
            "framework_error",
            "cuda-device-assert",
        ),
        # Lightning-AI/pytorch-lightning#5196 (case 4268): a batch Lightning did not move, in torch's older words
        (
            "RuntimeError: Tensor for 'out' is on CPU, Tensor for argument #1 'self' is on CPU, but expected them to be on GPU (while checking arguments for addmm)\n",
            "script_error",
            "device-mismatch",
        ),
    ],
)
def test_graph_recommender_and_tabular_libraries(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
