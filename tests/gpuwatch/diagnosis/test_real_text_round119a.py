"""Classes of misses from issue 19's rounds one hundred and nineteen to one hundred and twenty-three (corpus cases 4741-4865:
reports on LLM pretraining at scale, detection and segmentation training, training in hosted notebooks, users' own DDP
scripts, and mixed precision and numerics, taken as the search returned them; and one older miss, case 1592). Error messages are verbatim from the public reports named in
each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # leftthomas/CGD#12 (case 4860): autograd's anomaly detection naming PowBackward0
        (
            "RuntimeError: Function 'PowBackward0' returned nan values in its 0th output\n",
            "loss_divergence",
            "anomaly-nan-in-backward",
        ),
        # huggingface/trl#2564 (case 4864): TRL under DeepSpeed: Log1PBackward0 on rank 6
        (
            "[rank6]:               ^^^^^^^^^^^^^^^^^^^^^\nRuntimeError: Function 'Log1PBackward0' returned nan values in its 0th output.\n",
            "loss_divergence",
            "anomaly-nan-in-backward",
        ),
        # mk-minchul/AdaFace#127 (case 4849): AdaFace: GradScaler refusing fp16 parameters, the raising line
        (
            'ValueError("Attempting to unscale FP16 gradients.")\n',
            "framework_error",
            "grad-scaler-fp16-params",
        ),
        # haotian-liu/LLaVA#363 (case 4853): LLaVA LoRA with fp16 weights
        (
            "ValueError: Attempting to unscale FP16 gradients\n",
            "framework_error",
            "grad-scaler-fp16-params",
        ),
        # banctilrobitaille/kerosene#111 (case 4752): apex's fused kernels given a CPU tensor after a resume
        (
            "RuntimeError: A tensor was not cuda. (multi_tensor_apply at csrc/multi_tensor_apply.cuh:60)\n",
            "script_error",
            "caller-tensors-misplaced",
        ),
        # mazurowski-lab/finetune-SAM#19 (case 4828): SAM fine-tuning under DDP: tensors on two devices
        (
            "“all tensors to be on the same device,but found at least two devices,cuda:1 and cuda:0\n",
            "script_error",
            "caller-tensors-misplaced",
        ),
        # pytorch/pytorch#70985 (case 4823): all_gather given tensors of different sizes
        (
            "Runtime error: All tensor operands to scatter/gather  must have the same number of elements\n",
            "script_error",
            "caller-tensors-misplaced",
        ),
        # rawmarshmellows/deep-photo-aesthetics#4 (case 4754): torch.load on a truncated file
        (
            '---> 10     net.load_state_dict(torch.load(f"{save_path}/{checkpoint}", map_location=lambda storage, loc: storage))\n...\n\nRuntimeError: unexpected EOF. The file might be corrupted.\n',
            "checkpoint_load_error",
            "state-dict",
        ),
        # karpathy/nanoGPT#192 (case 4760): nanoGPT on an H100: the title's illegal memory access
        (
            "illegal memory access was encountered while running default GPT2 - small Training on NVIDIA GPU\n",
            "cuda_error",
            "illegal-memory-access-title",
        ),
        # facebookresearch/detectron2#1202 (case 4772): detectron2's Box2BoxTransform refusing its boxes
        (
            "[04/13 00:50:22 d2.data.common]: Serializing 416 elements to byte tensors and concatenating them all ...\n[04/13 00:50:22 d2.data.common]: Serialized dataset takes 0.12 MiB\n[04/13 00:50:22 d2.data.detection_utils]: TransformGens used in training: [ResizeShortestEdge(short_edge_length=(640, 672, 704, 736, 768, 800), max_size=1333, sample_style='choice'), RandomFlip()]\n[04/13 00:50:22 d2.data.build]: Using training sampler TrainingSampler\n'roi_heads.box_predictor.cls_score.weight' has shape (81, 2048) in the checkpoint but (7, 2048) in the model! Skipped.\n'roi_heads.box_predictor.cls_score.bias' has shape (81,) in the checkpoint but (7,) in the model! Skipped.\nInput boxes to Box2BoxTransform are not valid!\n",
            "framework_error",
            "detectron2-boxes-not-valid",
        ),
        # facebookresearch/Detectron#662 (case 4774): Caffe2's XavierFill: cuRAND could not allocate
        (
            'RuntimeError: [enforce fail at math_gpu.cu:1586] status == CURAND_STATUS_SUCCESS. 102 vs 0. Error at: /home/user/pytorch/caffe2/utils/math_gpu.cu:1586: CURAND_STATUS_ALLOCATION_FAILEDError from operator:\noutput: "gpu_0/res5_2_branch2a_w" name: "" type: "XavierFill" arg { name: "shape" ints: 512 ints: 2048 ints: 1 ints: 1 } device_option { device_type: 1 cuda_gpu_id: 0 }\n',
            "gpu_oom",
            "curand-alloc-failed",
        ),
        # megvii-research/AnchorDETR#16 (case 4776): AnchorDETR: boxes gone NaN
        (
            "generalized_box_iou\n    assert (boxes1[:, 2:] >= boxes1[:, :2]).all(), f\"incorrect boxes, boxes1 {boxes1}\"\nAssertionError: incorrect boxes, boxes1 tensor([[nan, nan, nan, nan],\n        [nan, nan, nan, nan],\n        [nan, nan, nan, nan],\n        ...,\n        [nan, nan, nan, nan],\n        [nan, nan, nan, nan],\n        [nan, nan, nan, nan]], device='cuda:4')\n",
            "loss_divergence",
            "boxes-nan",
        ),
        # ultralytics/yolov5#9681 (case 4779): YOLOv5's DDP asking an older torch's TCPStore for multi_tenant
        (
            'python -m torch.distributed.run --nproc_per_node 2 train.py --batch 16 --weights yolov5s.pt --device 0,1\n\nWARNING:__main__:\n*****************************************\nSetting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. \n*****************************************\nERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{\n  "message": {\n    "message": "TypeError: __init__(): incompatible constructor arguments. The following argument types are supported:\\n    1. torch._C._distributed_c10d.TCPStore(host_name: str, port: int, world_size: int, is_master: bool, timeout: datetime.timedelta = datetime.timedelta(0, 300))\\n\\nInvoked with: \'127.0.0.1\', 29500, 1, True, datetime.timedelta(0, 900); kwargs: multi_tenant=True",\n    "extraInfo": {\n      "py_callstack": "Traceback (most recent call last):\\n  File \\"/home/user/miniconda3/envs/yolov5-6-ssl/lib/python3.6\n',
            "import_error",
            "tcpstore-constructor-mismatch",
        ),
        # czczup/ViT-Adapter#16 (case 4782): a CUDA kernel's index assertion, cut before its start
        (
            'CUDA "index out of bounds"` failed.\n',
            "framework_error",
            "cuda-device-assert",
        ),
        # DOsinga/deep_learning_cookbook#71 (case 4796): a notebook's kernel that died
        (
            "Kernel Restarting\nThe kernel appears to have died. It will restart automatically.\n",
            "host_oom",
            "notebook-kernel-died",
        ),
        # ultralytics/hub#1170 (case 4792): Colab's session that crashed
        (
            "Your session crashed. Automatically restarting.\n",
            "host_oom",
            "notebook-kernel-died",
        ),
        # PaddlePaddle/Paddle#11656 (case 4797): Ubuntu's crash dialog after the kernel died
        (
            "The kernel appears to have died. It will restart automatically.\n应用程序python2.7意外停止\n",
            "framework_error",
            "native-crash-reported",
        ),
        # determined-ai/determined#8915 (case 4826): DDP's check that every rank built the same model
        (
            '[2024-02-27T21:05:18.670399Z] fa88a9df [rank=3] || INFO: [182] torch.distributed.distributed_c10d: Added key: store_based_barrier_key:1 to store for rank: 3\n[2024-02-27T21:05:18.681489Z] fa88a9df [rank=1] || INFO: [183] torch.distributed.distributed_c10d: Added key: store_based_barrier_key:1 to store for rank: 1\n[2024-02-27T21:05:18.682858Z] fa88a9df [rank=6] || INFO: [187] torch.distributed.distributed_c10d: Added key: store_based_barrier_key:1 to store for rank: 6\n[2024-02-27T21:05:18.692192Z] fa88a9df [rank=4] || INFO: [185] torch.distributed.distributed_c10d: Added key: store_based_barrier_key:1 to store for rank: 4\n[2024-02-27T21:05:18.692661Z] fa88a9df [rank=1] || INFO: [183] torch.distributed.distributed_c10d: Rank 1: Completed store-based barrier for key:store_based_barrier_key:1 with 8 nodes.\n[2024-02-27T21:05:18.693189Z] fa88a9df [rank=4] || INFO: [185] torch.distributed.distributed_c10d: Rank 4: Completed store-based barrier for key:store_based_barrier_key:1 with 8 nodes.\n[2024-02-27T21:05:18.694085Z] fa88a9df [rank=2] || INFO: [181] torch.distributed.distributed_c10d: Rank 2: Completed store-based barrier for key:store_based_barrier_key:1 with 8 nodes.\n[2024-02-27T21:05:18.694242Z] fa88a9df [rank=6] || INFO: [187] torch.distributed.distributed_c10d: Rank 6: Completed store-based bar\n[2024-02-27T21:35:28.419846Z] fa88a9df [rank=5] || RuntimeError: DDP expects same model across all ranks, but Rank 5 has 8 params, while rank 0 has inconsistent 0 params.\n[2024-02-27T21:35:28.419868Z] fa88a9df [rank=6] || Traceback (most recent call last):\n[2024-02-27T21:35:28.419903Z] fa88a9df [rank=6] ||   File "/run/determined/workdir/train.py", line 126, in <module>\n[2024-02-27T21:35:28.419925Z] fa88a9df [rank=0] || Traceback (most recent call last):\n[2024-02-27T21:35:28.419947Z] fa88a9df [rank=6] ||     run(local=local_training)\n[2024-02-27T21:35:28.419968Z] fa88a9df [rank=6] ||   File "/run/determined/workdir/train.py", line 116, in run\n[2024-02-27T21:35:28.419995Z] fa88a9df [rank=0] ||   File "/run/determined/workdir/train.py", line 126, in <module>\n[2024-02-27T21:35:28.420021Z] fa88a9df [rank=6] ||     trial = MNistTrial(train_context, hparams=hparams)\n[2024-02-27T21:35:28.420042Z] fa88a9df [rank=6] ||   File "/run/determined/workdir/train.py", line 46, in __init__\n[2024-02-27T21:35:28.420069Z] fa88a9df [rank=6] ||     self.model = self.context.wrap_model(model.build_model(hparams=hparams))\n[2024-02-27T21:35:28.420093Z] fa88a9df [rank=6] ||   File "/run/determined/pythonuserbase/lib/python3.10/site-packages/determined/pytorch/_pytorch_context.py", line 299, in wrap_model\n',
            "framework_error",
            "ranks-disagree-check",
        ),
        # NVIDIA/nccl#296 (case 4840): NCCL's check that ranks call the same collectives
        (
            "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs\n",
            "framework_error",
            "ranks-disagree-check",
        ),
        # pytorch/pytorch#83074 (case 4827): a monitored barrier's gloo peer gone
        (
            'loss.backward()\n  File "/user/alice/anaconda3/envs/nightly_torch/lib/python3.8/site-packages/torch/_tensor.py", line 484, in backward\n    torch.autograd.backward(\n  File "/user/alice/anaconda3/envs/nightly_torch/lib/python3.8/site-packages/torch/autograd/__init__.py", line 191, in backward\n    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\nRuntimeError: ProcessGroupWrapper: Monitored Barrier encountered error running collective: CollectiveFingerPrint(OpType=ALLREDUCE, TensorShape=[3810630], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float (default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false (default), memory_format=(nullopt))). Error: \n[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [172.16.30.151]:33483\nWARNING:torch.distributed.elastic.multiprocessing.api:Sending process 12591 closing signal SIGTERM\nERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 12590) of binary: /user/alice/anaconda3/envs/nightly_torch/bin/python\n',
            "network_error",
            "gloo-pair-closed-by-peer",
        ),
        # HRNet/HigherHRNet-Human-Pose-Estimation#11 (case 4842): HigherHRNet's losses NaN under AMP
        (
            "2019-12-12 15:32:31,243 Epoch: [40][1200/1603]  Time: 1.162s (1.383s)   Speed: 17.2 samples/s   Data: 0.000s (0.191s)   Stage0-heatmaps: nan (nan)      Stage1-heatmaps: nan (nan)      Stage0-push: nan (nan)  Stage1-push: 0.000e+00 (0.000e+00)      Stage0-pull: nan (nan)  Stage1-pull: 0.000e+00 (0.000e+00)\n2019-12-12 15:34:47,608 Epoch: [40][1300/1603]  Time: 1.177s (1.381s)   Speed: 17.0 samples/s   Data: 0.000s (0.189s)   Stage0-heatmaps: nan (nan)      Stage1-heatmaps: nan (nan)      Stage0-push: nan (nan)  Stage1-push: 0.000e+00 (0.000e+00)      Stage0-pull: nan (nan)  Stage1-pull: 0.000e+00 (0.000e+00)\n2019-12-12 15:37:04,760 Epoch: [40][1400/1603]  Time: 1.322s (1.381s)   Speed: 15.1 samples/s   Data: 0.000s (0.188s)   Stage0-heatmaps: 9.458e-03 (nan)        Stage1-heatmaps: 4.662e-02 (nan)        Stage0-push: 1.692e-04 (nan)    Stage1-push: 0.000e+00 (0.000e+00)      Stage0-pull: 1.046e-05 (nan)    Stage1-pull: 0.000e+00 (0.000e+00)\n",
            "loss_divergence",
            "ae-losses-nan",
        ),
        # huggingface/open-r1#299 (case 1592): ZeRO-3 finding a parameter still held by sub-modules
        (
            "{'loss': 0.0115, 'grad_norm': 0.5289333401881726, 'learning_rate': 3.6124283849\n5853e-07, 'rewards/accuracy_reward': 0.2666666775941849, 'rewards/format_reward\n': 0.8750000357627868, 'reward': 1.1416666984558106, 'reward_std': 0.3181980699\n300766, 'completion_length': 317.7666748046875, 'kl': 0.92265625, 'epoch': 1.0}\n 91%|████████████████████████████▏  | 378/415 [10:26:07<51:42, 83.86s/it]Traceb\nack (most recent call last):\n[rank2]: Traceback (most recent call last):\n[rank2]:   File \"/workspace/sunjinfeng/github_projet/open-r1/src/open_r1/grpo.p\ny\", line 259, in <module>\n[rank2]:     main(script_args, training_args, model_args)\n[rank2]:   File \"/workspace/sunjinfeng/github_projet/open-r1/src/open_r1/grpo.p\ny\", line 213, in main\n[rank2]:     train_result = trainer.train(resume_from_checkpoint=checkpoint)\n[rank2]:                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n[rank2]:     assert not param.ds_active_sub_modules, param.ds_summary()\n",
            "framework_error",
            "deepspeed-param-already-in-registry",
        ),
    ],
)
def test_round119_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_dead_notebook_kernel_gives_way_to_any_error_shown() -> None:
    """A kernel that died with no cause is a consequence: an error the notebook printed before it is the answer."""
    text = (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "The kernel appears to have died. It will restart automatically.\n"
    )
    assert reason_and_rule(text)[0] == "cuda_error"


def test_detrs_box_assert_alone_is_not_read() -> None:
    """DETR's generalized_box_iou assert is labelled both ways in the corpus (1014, 4775): no rule reads it."""
    assert reason_and_rule("assert (boxes1[:, 2:] >= boxes1[:, :2]).all()\n")[0] == "unknown"
