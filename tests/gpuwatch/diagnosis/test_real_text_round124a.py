"""Classes of misses from issue 19's rounds one hundred and twenty-four to one hundred and twenty-seven (corpus cases 4871-4970:
reports on robotics and game RL, text-to-speech and music training, 3D and NeRF training, and embedding and retrieval
training, taken as the search returned them; and one older miss, case 4147). Error messages are verbatim from the public reports named in
each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # isaac-sim/IsaacGymEnvs#79 (case 4873): Isaac Gym's PhysX GPU solver failing to launch its kernels
        (
            "/buildAgent/work/99bede84aa0a52c2/source/gpusolver/src/PxgTGSCudaSolverCore.cpp (1814) : internal error : GPU concludeBlockFunction fail to launch kernel!!\n\n/buildAgent/work/99bede84aa0a52c2/source/gpusolver/src/PxgTGSCudaSolverCore.cpp (1858) : internal error : GPU solveContactParallel fail to launch kernel!!\n",
            "cuda_error",
            "physx-gpu-kernel-failure",
        ),
        # isaac-sim/OmniIsaacGymEnvs#11 (case 4875): Isaac Sim's PhysX CUDA context manager error
        (
            '2022-09-19 00:58:31 [21,848ms] [Error] [omni.physx.plugin] Cuda context manager error, simulation will be stopped and new cuda context manager will be created.\nraise Exception("Failed to create simulation view backend")\n',
            "cuda_error",
            "physx-gpu-kernel-failure",
        ),
        # onpix/LLNeRF#9 (case 4882): LLNeRF under JAX: XLA's RESOURCE_EXHAUSTED
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 20029400304 bytes.\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # jkulhanek/tetra-nerf#12 (case 4936): Tetra-NeRF: a CUDA call to cudaMalloc out of memory
        (
            "RuntimeError: CUDA call (cudaMalloc ...... failed with error: 'out of memory\n",
            "gpu_oom",
            "cuda-oom",
        ),
        # NovaSky-AI/SkyRL#624 (case 4886): SkyRL's JAX trainer: XLA's allocator dumping its pools
        (
            "E1103 18:23:55.102618 3413782 gpu_cudamallocasync_allocator.cc:73] 786432, 427\nE1103 18:23:55.102625 3413782 gpu_cudamallocasync_allocator.cc:73] 2097152, 784\nE1103 18:23:55.102631 3413782 gpu_cudamallocasync_allocator.cc:73] 38895616, 1\n",
            "gpu_oom",
            "xla-async-allocator-dump",
        ),
        # ir413/mvp#17 (case 4893): MVP's PPO: the shell's 'PID segmentation fault'
        (
            "72956 segmentation fault\n",
            "framework_error",
            "native-crash-reported",
        ),
        # YYuX-1145/Bert-VITS2-Integration-package#58 (case 4898): Bert-VITS2's loader failing to read a sample's BERT features
        (
            'You should probably TRAIN this model on a down-stream task to be able to use it for predictions and inference.\n  0%|                                                                                            | 0/2 [00:00<?, ?it/s]12-28 01:42:31 WARNING  | data_utils.py:157 | Bert load Failed\n12-28 01:42:31 WARNING  | data_utils.py:157 | Bert load Failed\n12-28 01:42:31 WARNING  | data_utils.py:158 | unpickling stack underflow\n12-28 01:42:31 WARNING  | data_utils.py:158 | unpickling stack underflow\n  0%|                                                                                            | 0/2 [00:02<?, ?it/s]\nTraceback (most recent call last):\n  File "train_ms.py", line 840, in <module>\n    run()\n  File "train_ms.py", line 361, in run\n    train_and_evaluate(\n  File "train_ms.py", line 423, in train_and_evaluate\n    for batch_idx, (\n  File "C:\\AI\\AIsound\\Bert-VITS2-2.3\\venv\\lib\\site-packages\\tqdm\\std.py", line 1178, in __iter__\n    for obj in iterable:\n  File "C:\\AI\\AIsound\\Bert-VITS2-2.3\\venv\\lib\\site-packages\\torch\\utils\\data\\dataloader.py", line 630, in __next__\n    data = self._next_data()\n  File "C:\\AI\\AIsound\\Bert-VITS2-2.3\\venv\\lib\\site-packages\\torch\\utils\\data\\dataloader.py", line 1345, in _next_data\n    return self._process_data(data)\n',
            "dataloader_error",
            "bert-vits2-bert-load-failed",
        ),
        # nerfstudio-project/nerfstudio#1217 (case 4933): nerfstudio in AIStation's GPU-partitioned container
        (
            "gpu_partition - [BackTraceStack] warn:/opt/conda/envs/nerfstudio/lib/python3.8/site-packages/tinycudann_bindings_80/_C.cpython-38-x86_64-linux-gnu.so(+0x6d7bf7) [0x7f1100afabf7]\ngpu_partition - [BackTraceStack] warn:/opt/conda/envs/nerfstudio/lib/python3.8/site-packages/tinycudann_bindings_80/_C.cpython-38-x86_64-linux-gnu.so(+0x6db578) [0x7f1100afe578]\n",
            "import_error",
            "gpu-partition-layer-backtrace",
        ),
        # WuJH2001/Swift4d#17 (case 4937): Swift4D: tiny-cuda-nn's CUTLASS matmul
        (
            "cutlass_matmul.h:330 status failed with Error Internal when using tiny-cuda-nn\n",
            "framework_error",
            "tcnn-cutlass-internal",
        ),
        # bennyguo/instant-nsr-pl#13 (case 4940): instant-nsr-pl: the same, 'error Error Internal'
        (
            'Global seed set to 42\nWarning: FullyFusedMLP is not supported for the selected architecture 70. Falling back to CutlassMLP. For maximum performance, raise the target GPU architecture to 75+.\nWarning: FullyFusedMLP is not supported for the selected architecture 70. Falling back to CutlassMLP. For maximum performance, raise the target GPU architecture to 75+.\nUsing 16bit native Automatic Mixed Precision (AMP)\nGPU available: True (cuda), used: True\nTPU available: False, using: 0 TPU cores\nIPU available: False, using: 0 IPUs\nHPU available: False, using: 0 HPUs\n`Trainer(limit_train_batches=1.0)` was configured so 100% of the batches per epoch will be used..\nGlobal seed set to 42\nInitializing distributed: GLOBAL_RANK: 0, MEMBER: 1/1\n----------------------------------------------------------------------------------------------------\ndistributed_backend=nccl\nAll distributed processes registered. Starting with 1 processes\n----------------------------------------------------------------------------------------------------\n\nLOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]\n\n  | Name  | Type      | Params\n------------------------------------\n0 | model | NeuSModel | 12.6 M\n  File "/home/user/anaconda3/envs/instant-nsr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1190, in _call_impl\n    return forward_call(*input, **kwargs)\n  File "/home/user/anaconda3/envs/instant-nsr/lib/python3.10/site-packages/torch/nn/parallel/distributed.py", line 1040, in forward\n    output = self._run_ddp_forward(*inputs, **kwargs)\n  File "/home/user/anaconda3/envs/instant-nsr/lib/python3.10/site-packages/torch/nn/parallel/distributed.py", line 1000, in _run_ddp_forward\n    return module_to_run(*inputs[0], **kwargs[0])\n  File "/home/user/anaconda3/envs/instant-nsr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1190, in _call_impl\n    return forward_call(*input, **kwargs)\n  File "/home/user/anaconda3/envs/instant-nsr/lib/python3.10/site-packages/pytorch_lightning/overrides/base.py", line 90, in forward\n    return self.module.validation_step(*inputs, **kwargs)\n  File "/home/user/code/instant-nsr-pl/systems/neus.py", line 137, in validation_step\n    out = self(batch)\n  File "/home/user/anaconda3/envs/instant-nsr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1190, in _call_impl\n    return forward_call(*input, **kwargs)\n  File "/home/user/code/instant-nsr-pl/systems/neus.py", line 46, in forward\n    return self.m\n[error] tiny-cuda-nn/cutlass_matmul.h:332 status failed with error Error Internal\n',
            "framework_error",
            "tcnn-cutlass-internal",
        ),
        # okio-ai/nendo-platform#71 (case 4909): Nendo's MusicGen trainer: a plugin without the function called
        (
            "2024-03-21 00:06:10 nendo.schema.exception.NendoPluginRuntimeError: Plugin nendo_plugin_musicgen has no function train\n",
            "script_error",
            "plugin-has-no-function",
        ),
        # ShichenLiu/SoftRas#26 (case 4942): SoftRas built for another architecture
        (
            "Error in forward_transform_inv_triangle: invalid device function\nError in forward_soft_rasterize: invalid device function\nError in backward_soft_rasterize: invalid device function\n",
            "import_error",
            "extension-invalid-device-function",
        ),
        # FlagOpen/FlagEmbedding#1064 (case 4949): FlagEmbedding's BGE-M3 without a process group
        (
            "    raise ValueError('Distributed training has not been initialized for repr\n",
            "framework_error",
            "framework-needs-distributed",
        ),
        # Alibaba-NLP/ACE#26 (case 4952): ACE: cuBLAS's bare runtime error
        (
            "RuntimeError: cublas runtime error\n",
            "cuda_error",
            "cublas-runtime-error-bare",
        ),
        # p-christ/Deep-Reinforcement-Learning-Algorithms-with-PyTorch#66 (case 4878): a PPO run sharing CUDA tensors between processes on Windows
        (
            "RuntimeError: cuda runtime error (801) : operation not supported at ..\\torch/csrc/generic/StorageSharing.cpp:247\n",
            "framework_error",
            "cuda-ipc-unsupported",
        ),
        # salesforce/ctrl#63 (case 4147): Colab fine-tuning CTRL: tcmalloc's large host allocations
        (
            "tcmalloc: large alloc 1262256128 bytes == 0x11ff50000 @  0x7f3452087b6b 0x7f34520a7379 0x7f340d73b754 0x7f340d6f6c8a 0x7f340d433f11 0x7f340d4415b2 0x7f340d449dda 0x7f3416665097 0x7f3416666bee 0x7f3416666dcd 0x7f3416660a3b 0x7f341660d781 0x7f341660e164 0x7f341651d3b9 0x7f341651e72a 0x7f3416520187 0x7f3416522122 0x7f34165156d1 0x7f341651713c 0x7f34134ad211 0x7f34134af0a6 0x7f34134b0f26 0x7f34134b1654 0x7f3410dd3755 0x7f34134ee7cd 0x7f34134ef505 0x7f3410dd0b58 0x7f3410dd0c9a 0x7f3410d87f8e 0x50a84f 0x50c549\ntcmalloc: large alloc 1262256128 bytes == 0x11ff50000 @  0x7f3452087b6b 0x7f34520a7379 0x7f340d73b754 0x7f340d6f6c8a 0x7f340d433f11 0x7f340d4415b2 0x7f340d449dda 0x7f3416665097 0x7f3416666bee 0x7f3416666dcd 0x7f3416660a3b 0x7f341660d781 0x7f341660e164 0x7f341651d3b9 0x7f341651e72a 0x7f3416520187 0x7f3416522122 0x7f34165156d1 0x7f341651713c 0x7f34134ad211 0x7f34134af0a6 0x7f34134b0f26 0x7f34134b1654 0x7f3410dd3755 0x7f34134ee7cd 0x7f34134ef505 0x7f3410dd0b58 0x7f3410dd0c9a 0x7f3410d87f8e 0x50a84f 0x50c549\n^C\n",
            "host_oom",
            "tcmalloc-large-alloc",
        ),
    ],
)
def test_round124_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_tcmallocs_large_allocations_give_way_to_any_error() -> None:
    """Large host allocations are a weak sign: an error the run printed is the answer."""
    text = (
        "tcmalloc: large alloc 1262256128 bytes == 0x11ff50000 @  0x7f3452087b6b 0x7f34520a7379\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    assert reason_and_rule(text)[0] == "gpu_oom"


def test_xlas_allocator_dump_gives_way_to_the_error_it_precedes() -> None:
    """XLA's allocator dump is weak: the run's own error line is the answer."""
    text = (
        "E1103 18:23:55.102618 3413782 gpu_cudamallocasync_allocator.cc:73] 786432, 427\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert reason_and_rule(text)[0] == "cuda_error"
