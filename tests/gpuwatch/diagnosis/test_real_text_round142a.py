"""Classes of misses from issue 19's rounds one hundred and forty-two to one hundred and forty-nine (corpus cases
5296-5494: reports on LLM fine-tuning toolkits, medical imaging, NeRF and Gaussian splatting, Colossal-AI/Composer/
Fabric/FSDP, segmentation and SAM, PaddlePaddle/MXNet/Chainer/CNTK, sequence-to-sequence and translation, and video
understanding, taken as the search returned them). Error messages are verbatim from the public reports named in each
test; hosts, paths and pids may be made up."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # bitsandbytes-foundation/bitsandbytes#289 (case 5303): kohya_ss LoRA training on Windows: bitsandbytes finds no libcudart.so, loads libbitsandbytes_cpu.so, and train_network.py's get_optimizer dies inside ...
        (
            'CUDA_SETUP: WARNING! libcudart.so not found in any environmental path. Searching /usr/local/cuda/lib64...\nD:\\kohya\\kohya_ss\\venv\\lib\\site-packages\\bitsandbytes\\cuda_setup\\paths.py:27: UserWarning: WARNING: The following directories listed in your path were found to be non-existent: {WindowsPath(\'/usr/local/cuda/lib64\')}\n  warn(\nWARNING: No libcudart.so found! Install CUDA or the cudatoolkit package (anaconda)!\nCUDA SETUP: Loading binary D:\\kohya\\kohya_ss\\venv\\lib\\site-packages\\bitsandbytes\\libbitsandbytes_cpu.so...\nTraceback (most recent call last):\n  File "D:\\kohya\\kohya_ss\\train_network.py", line 748, in <module>\n    train(args)\n  File "D:\\kohya\\kohya_ss\\train_network.py", line 223, in train\n    optimizer_name, optimizer_args, optimizer = train_util.get_optimizer(args, trainable_params)\n  File "D:\\kohya\\kohya_ss\\library\\train_util.py", line 2312, in get_optimizer\n    import bitsandbytes as bnb\n  File "D:\\kohya\\kohya_ss\\venv\\lib\\site-packages\\bitsandbytes\\__init__.py", line 6, in <module>\n    from .autograd._functions import (\n  File "D:\\kohya\\kohya_ss\\venv\\lib\\site-packages\\bitsandbytes\\autograd\\_functions.py", line 5, in <module>\n    import bitsandbytes.functional as F\n  File "D:\\kohya\\kohya_ss\\venv\\lib\\site-packages\\bitsandbytes\\functional.py", line 13, in <module>\n    from .cextension import COMPILED_WITH_CUDA, lib\n',
            "import_error",
            "bitsandbytes-cpu-library",
            "train.log",
        ),
        # hiyouga/LlamaFactory#9258 (case 5306): LLaMA-Factory LoRA SFT of Llama 3.1 405B on 2 x H200 with DeepSpeed ZeRO-3 CPU offload under Ray: training finishes (143/143, train_loss 0.628), then during ...
        (
            "{'train_runtime': 23328.5006, 'train_samples_per_second': 0.391, 'train_steps_per_second': 0.006, 'train_loss': 0.6281500965148419, 'epoch': 1.0}\n(head, rank=0, pid=4503) \n100%|██████████| 143/143 [6:28:47<00:00, 162.82s/it]\n100%|██████████| 143/143 [6:28:47<00:00, 163.13s/it]\n...\nMemory on the node (IP: 10.1.180.84, ID: ba65c80c8aec6b1c406693f640c53f85422d4d73b069747d69875d42) where the task (task ID: d221d26232c9bae05def6a6d00dbd292d4fc77cc01000000, name=head, rank=0,, pid=4503, memory used\n",
            "host_oom",
            "memory-monitor-kill",
            "train.log",
        ),
        # da-fr/arc-prize-2024#10 (case 5308): ARC-prize fine-tuning code on unsloth 2025.3.19: 'RuntimeError: Direct module loading failed for UnslothGKDTrainer: non-default argument follows default ...
        (
            "RuntimeError: Direct module loading failed for UnslothGKDTrainer: non-default argument follows default argument (UnslothGKDTrainer.py, line 620)\n",
            "syntax_error",
            "syntax-message-carried",
            "train.log",
        ),
        # Project-MONAI/research-contributions#34 (case 5323): UNETR BTCV tutorial training: 'a weird CUDA illegal memory access error during training', located at loss.backward() with CUDA_LAUNCH_BLOCKING=1; the ...
        (
            "A weird CUDA illegal memory access error when running the uneter BTCV tutorial\nI got a weird CUDA illegal memory access error during training.\nThe error occurred at `loss.backward()`.\n",
            "cuda_error",
            "cuda-fault",
            "train.log",
        ),
        # NVlabs/instant-ngp#1109 (case 5352): Thin: instant-ngp testbed run; the title (cut by GitHub at 'encounte') is the uncaught tiny-cuda-nn exception 'gpu_memory.h:601 cudaDeviceSynchronize() ...
        (
            "ERROR Uncaught exception: /home/wangxiaoyuan/instant-ngp/dependencies/tiny-cuda-nn/include/tiny-cuda-nn/gpu_memory.h:601 cudaDeviceSynchronize() failed with error an illegal memory access was encounte\n",
            "cuda_error",
            "cuda-fault",
            "train.log",
        ),
        # vuer-ai/feature-splatting#6 (case 5353): Thin: ns-train feature-splatting on the nerfstudio poster scene, 16 GB RAM + RTX 3080; the terminal (a screenshot) showed 'killed' right after ...
        (
            'The OOM killer was triggered while full_images_datamanager.py had cached both eval images and train images, and the next step was to train the model. At that point, the terminal showed "killed."\n',
            "host_oom",
            "killed-in-words",
            "train.log",
        ),
        # LeeDoYup/FixMatch-pytorch#2 (case 5355): Thin: FixMatch single-node multi-GPU run via mp.spawn; process 0 fails in DistributedDataParallel.__init__ (the excerpt is cut there) and the title says ...
        (
            '$ python train.py --world-size 1 --rank 0 --multiprocessing-distributed --num_labels 4000 --save_name cifar10_4000 --dataset cifar10 --num_classes 10\nTraceback (most recent call last):\n  File "train.py", line 316, in <module>\n    main(args)\n  File "train.py", line 62, in main\n    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))\n  File "/home/yuansong/.local/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 200, in spawn\n    return start_processes(fn, args, nprocs, join, daemon, start_method=\'spawn\')\n  File "/home/yuansong/.local/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 158, in start_processes\n    while not context.join():\n  File "/home/yuansong/.local/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 119, in join\n    raise Exception(msg)\nException:\n\n-- Process 0 terminated with the following error:\nTraceback (most recent call last):\n  File "/home/yuansong/.local/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 20, in _wrap\n    fn(i, *args)\n  File "/data/FixMatch-pytorch/train.py", line 155, in main_worker\n    device_ids=[args.gpu])\n  File "/home/yuansong/.local/lib/python3.6/site-packages/torch/nn/parallel/distributed.py", line 333, in __init__\n[...]\nNCCL error when train with single node & multi gpus\n',
            "nccl_error",
            "nccl-error-in-words",
            "train.log",
        ),
        # facebookresearch/deit#28 (case 5356): Thin: DeiT 4-GPU training on gpu-dev006 with NCCL_DEBUG=INFO; the excerpt keeps the distributed init and NCCL bootstrap lines (RoCE via mlx4_0) and is cut ...
        (
            "(deit92) [yuxin.fang@gpu-dev006 deit]$ NCCL_DEBUG=INFO bash train.sh \ntraining...\n| distributed init (rank 3): env://\n| distributed init (rank 1): env://\n| distributed init (rank 0): env://\n| distributed init (rank 2): env://\ngpu-dev006:25486:25486 [0] NCCL INFO Bootstrap : Using [0]enp7s0:10.10.112.56<0> [1]virbr0:192.168.122.1<0>\ngpu-dev006:25486:25486 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation\ngpu-dev006:25486:25486 [0] NCCL INFO NET/IB : Using [0]mlx4_0:1/RoCE ; OOB enp7s0:10.10.112.56<0>\ngpu-dev006:25486:25486 [0] NCCL INFO Using network IB\nAnother NCCL error\n",
            "nccl_error",
            "nccl-error-in-words",
            "train.log",
        ),
        # nerfstudio-project/nerfstudio#2128 (case 5357): ns-train from the first-NeRF tutorial with --machine.num-gpus, an option renamed --machine.num-devices; tyro prints the usage (the excerpt is cut before its ...
        (
            "$ export CUDA_VISIBLE_DEVICES=0,1\n$ ns-train nerfacto --vis viewer+wandb --machine.num-gpus 2 --pipeline.datamanager.train-num-rays-per-batch 4096 --data data/nerfstudio/aspen\nusage: ns-train nerfacto-big [-h] [--output-dir PATH] [--method-name {None}|STR] [--experiment-name {None}|STR] [--project-name {None}|STR] [--timestamp STR]\n                             [--machine.seed INT] [--machine.num-devices INT] [--machine.num-machines INT] [--machine.machine-rank INT] [--machine.dist-url STR]\n                             [--machine.device-type {cpu,cuda,mps}] [--logging.relative-log-dir PATH] [--logging.steps-per-log INT] [--logging.max-buffer-size INT]\n                             [--logging.local-writer.enable {True,False}]\n                             [--logging.local-writer.stats-to-track \n{ITER_TRAIN_TIME,TOTAL_TRAIN_TIME,ETA,TRAIN_RA\n",
            "argument_error",
            "argparse-usage-exit",
            "train.log",
        ),
        # modelscope/ms-swift#6107 (case 5359): Thin: ms-swift Megatron SFT of Qwen3-VL-235B-A22B on 2 nodes x 4 GPUs; the excerpt keeps only NCCL INFO communicator set-up lines of the second node and is ...
        (
            "iv-ydin754tmoxjd1twgixh:1458548:1480519 [0] NCCL INFO NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS 0)\niv-ydin754tmoxjd1twgixh:1458550:1480518 [2] NCCL INFO Setting affinity for GPU 2 to 0-31,64-95\niv-ydin754tmoxjd1twgixh:1458552:1480520 [4] NCCL INFO Setting affinity for GPU 4 to 32-63,96-127\niv-ydin754tmoxjd1twgixh:1458552:1480520 [4] NCCL INFO NVLS multicast support is not available on dev 4 (NVLS_NCHANNELS 0)\niv-ydin754tmoxjd1twgixh:1458550:1480518 [2] NCCL INFO NVLS multicast support is not available on dev 2 (NVLS_NCHANNELS 0)\niv-ydin754tmoxjd1twgixh:1458554:1480517 [6] NCCL INFO Setting affinity for GPU 6 to 32-63,96-127\niv-ydin754tmoxjd1twgixh:1458554:1480517 [6] NCCL INFO NVLS multicast support is not available on dev 6 (NVLS_NCHANNELS 0)\niv-ydin754tmoxjd1twgixh:1458554:1480517 [6] NCCL INFO comm 0x5a8163e0 rank 7 nRanks 8 nNodes 2 localRanks 4 localRank 3 MNNVL 0\niv-ydin754tmoxjd1twgixh:1458554:1480517 [6] NCCL INFO Trees [0] -1/-1/-1->7->6 [1] -1/-1/-1->7->6\niv-ydin754tmoxjd1twgixh:1458554:1480517 [6] NCCL INFO P2P Chunksize set to 131072\niv-ydin754tmoxjd1twgixh:1458552:1480520 [4] NCCL INFO comm 0x58c7dc60 rank 6 nRanks 8 nNodes 2 localRanks 4 localRank 2 MNNVL 0\niv-ydin754tmoxjd1twgixh:1458552:1480520 [4] NCCL INFO Trees [0] 7/-1/-1->6->5 [1] 7/-1/-1->6->5\nmegatron sft多机训练Qwen3-VL-235B-A22B-Instruct报nccl相关错误\n",
            "nccl_error",
            "nccl-error-in-words",
            "rank4.log",
        ),
        # nerfstudio-project/nerfstudio#2528 (case 5361): nerfstudio gaussian-splatting branch on mip360 bicycle with --vis wandb: the eval pipeline (not yet supported) hands a batch of cameras to the model and ...
        (
            '$ ns-train gaussian-splatting --vis wandb --experiment-name gsplats colmap --colmap_path sparse/0 --data data/mip360/bicycle\nFile "/home/ubuntu/nerfstudio/nerfstudio/models/gaussian_splatting.py", line 475, in get_outputs\n    assert camera.shape[0] == 1, "Only one camera at a time"\n',
            "framework_error",
            "exception-AssertionError",
            "train.log",
        ),
        # NVlabs/instant-ngp#182 (case 5364): instant-ngp testbed.exe on 86 images of 4000x3000 with an RTX 3060 Ti: tiny-cuda-nn's 'Could not allocate memory: ... cudaMalloc(...) failed with error out ...
        (
            "(ngp) E:\\TUTORIAL\\ngp\\instant-ngp>E:\\TUTORIAL\\ngp\\instant-ngp\\build\\testbed.exe --scene data/escalera\n21:39:07 INFO     Loading NeRF dataset from\n21:39:07 INFO       data\\escalera\\transforms.json\n21:39:08 SUCCESS  Loaded 86 images of size 4000x3000 after 0s\n21:39:08 INFO       cam_aabb=[min=[-0.840304,-2.04571,0.612019], max=[1.83417,3.2325,1.5317]]\n21:39:09 ERROR    Uncaught exception: Could not allocate memory: E:\\TUTORIAL\\ngp\\instant-ngp\\dependencies\\tiny-cuda-nn\\include\\tiny-cuda-nn/gpu_memory.h:109 cudaMalloc(&rawptr, n_bytes+DEBUG_GUARD_SIZE*2) failed with error out of memory\n",
            "gpu_oom",
            "cuda-oom",
            "train.log",
        ),
        # tloen/alpaca-lora#385 (case 5376): alpaca-lora finetune.py (evol_instruct_70k) on an A100 80 GB fails at step 0/3186 inside trainer.train; the traceback is cut in the excerpt before its last ...
        (
            'A100 80 G fine tune llama-65b-hf got CUDAout of Memory\nLoading cached split indices for dataset at /root/.cache/huggingface/datasets/victor123___json/victor123--evol_instruct_70k-de37dd5750ecc166/0.0.0/fe5dd6ea2639a6df622901539cb550cf8797e5a6b2dd7af1cf934bed8e233e6e/cache-f60fe2ec6b4cb6b4.arrow and /root/.cache/huggingface/datasets/victor123___json/victor123--evol_instruct_70k-de37dd5750ecc166/0.0.0/fe5dd6ea2639a6df622901539cb550cf8797e5a6b2dd7af1cf934bed8e233e6e/cache-b5791538b539bc0d.arrow\n  0%|                                                                    | 0/3186 [00:00<?, ?it/s]Traceback (most recent call last):\n  File "/root/alpaca-lora/finetune.py", line 283, in <module>\n    fire.Fire(train)\n  File "/usr/local/lib/python3.10/dist-packages/fire/core.py", line 141, in Fire\n    component_trace = _Fire(component, args, parsed_flag_args, context, name)\n  File "/usr/local/lib/python3.10/dist-packages/fire/core.py", line 475, in _Fire\n    component, remaining_args = _CallAndUpdateTrace(\n  File "/usr/local/lib/python3.10/dist-packages/fire/core.py", line 691, in _CallAndUpdateTrace\n    component = fn(*varargs, **kwargs)\n  File "/root/alpaca-lora/finetune.py", line 273, in train\n    trainer.train(resume_from_checkpoint=resume_from_checkpoint)\n',
            "gpu_oom",
            "oom-in-words",
            "train.log",
        ),
        # Lightning-AI/pytorch-lightning#436 (case 5380): Thin: PyTorch Lightning 0.5.2.1 basic_examples/gpu_template.py with the dp backend on a 2-GPU cluster node in interactive mode: 'Fatal Python error:Aborted' ...
        (
            "I tried to run gpu_template.py from basic_examples but I get an error that says Fatal Python error:Aborted\n",
            "framework_error",
            "native-crash-reported",
            "train.log",
        ),
        # hiyouga/LlamaFactory#9382 (case 5381): llamafactory-cli train examples/megatron/qwen3_moe_full.yaml without USE_MCA=1: 'ValueError: Some keys are not used by the HfArgumentParser: ...
        (
            "llamafactory-cli train examples/megatron/qwen3_moe_full.yaml\nValueError: Some keys are not used by the HfArgumentParser: ['apply_rope_fusion', 'bias_activation_fusion', 'expert_model_parallel_size', 'moe_grouped_gemm', 'moe_token_dispatcher_type', 'overlap_grad_reduce', 'overlap_param_gather', 'pipeline_model_parallel_size', 'recompute_granularity', 'sequence_parallel', 'tensor_model_parallel_size', 'use_distributed_optimizer']\n",
            "argument_error",
            "argparse",
            "train.log",
        ),
        # Lightning-AI/lightning-thunder#2629 (case 5384): lightning-thunder's FSDP tutorial script: thunder.distributed.fsdp(model) raises 'TypeError: Expected `model` to be of type ...
        (
            '[rank0]:   File "/opt/pytorch/lightning-thunder/notebooks/dev_tutorials/thunder_fsdp_simple_example.py", line 49, in <module>\n[rank0]:     cmodel = thunder.jit(thunder.distributed.fsdp(model))\n[rank0]:                          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n[rank0]:   File "/opt/pytorch/lightning-thunder/thunder/distributed/__init__.py", line 435, in fsdp\n[rank0]:     raise TypeError(\n[rank0]: TypeError: Expected `model` to be of type `thunder.core.module.ThunderModule`, but got Sequential\n',
            "framework_error",
            "exception-TypeError",
            "rank0.log",
        ),
        # Lightning-AI/litgpt#570 (case 5385): lit-parrot finetune/lora.py launched through Fabric with FSDP and activation checkpointing: torch FSDP raises "Non-root FSDP instance's `_is_root` should ...
        (
            'Non-root FSDP instance\'s `_is_root` should not have been set yet or should have been set to `False`\n  File "/home/carlos/lit-parrot/finetune/lora.py", line 327, in <module>\n    CLI(setup)\n  File "/home/carlos/venv/lib/python3.10/site-packages/jsonargparse/cli.py", line 85, in CLI\n    return _run_component(component, cfg_init)\n  File "/home/carlos/venv/lib/python3.10/site-packages/jsonargparse/cli.py", line 147, in _run_component\n    return component(**cfg)\n  File "/home/carlos/lit-parrot/finetune/lora.py", line 82, in setup\n    fabric.launch(main, data_dir, checkpoint_dir, out_dir, quantize)\n  File "/home/carlos/lightning/src/lightning/fabric/fabric.py", line 834, in launch\n    return self._wrap_and_launch(function, self, *args, **kwargs)\n  File "/home/carlos/lightning/src/lightning/fabric/fabric.py", line 919, in _wrap_and_launch\n    return launcher.launch(to_run, *args, **kwargs)\n  File "/home/carlos/lightning/src/lightning/fabric/strategies/launchers/subprocess_script.py", line 101, in launch\n    return function(*args, **kwargs)\n  File "/home/carlos/lightning/src/lightning/fabric/fabric.py", line 925, in _wrap_with_setup\n    return to_run(*args, **kwargs)\n',
            "framework_error",
            "fsdp-root-state",
            "train.log",
        ),
        # OFA-Sys/ONE-PEACE#17 (case 5399): ONE-PEACE semantic-segmentation fine-tuning on the user's own dataset (mmseg 0.x train_segmentor): 'Loaded 0 images', then torch's RandomSampler raises ...
        (
            '2023-06-25 03:50:47,533 - mmseg - INFO - Loaded 0 images\nfatal: not a git repository (or any parent up to mount point /)\nStopping at filesystem boundary (GIT_DISCOVERY_ACROSS_FILESYSTEM not set).\nTraceback (most recent call last):\n  File "/home/ONE-PEACE-main/one_peace_vision/seg/train.py", line 245, in <module>\n    main()\n  File "/home/ONE-PEACE-main/one_peace_vision/seg/train.py", line 234, in main\n    train_segmentor(\n  File "/usr/local/lib/python3.10/dist-packages/mmseg/apis/train.py", line 101, in train_segmentor\n    data_loaders = [build_dataloader(ds, **train_loader_cfg) for ds in dataset]\n  File "/usr/local/lib/python3.10/dist-packages/mmseg/apis/train.py", line 101, in <listcomp>\n    data_loaders = [build_dataloader(ds, **train_loader_cfg) for ds in dataset]\n  File "/usr/local/lib/python3.10/dist-packages/mmseg/datasets/builder.py", line 153, in build_dataloader\n    data_loader = DataLoader(\n  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/dataloader.py", line 353, in __init__\n    sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]\n  File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/sampler.py", line 107, in __init__\n    raise ValueError("num_samples sho\n',
            "dataloader_error",
            "dataset-loaded-nothing",
            "train.log",
        ),
        # lhoyer/DAFormer#22 (case 5403): DAFormer UDA training (mmseg logger): decode.loss_seg, src.loss_imnet_feat_dist and mix.decode.loss_seg are nan from iteration 50 on while training ...
        (
            "2022-05-07 17:02:57,696 - mmseg - INFO - Iter [50/40000]        lr: 1.958e-06, eta: 1 day, 0:29:42, time: 2.207, data_time: 0.029, memory: 9801, decode.loss_seg: nan, decode.acc_seg: 32.2611, src.loss_imnet_feat_dist: nan, mix.decode.loss_seg: nan, mix.decode.acc_seg: 54.3771\n2022-05-07 17:04:45,225 - mmseg - INFO - Iter [100/40000]       lr: 3.950e-06, eta: 1 day, 0:08:59, time: 2.151, data_time: 0.017, memory: 9801, decode.loss_seg: nan, decode.acc_seg: 41.2013, src.loss_imnet_feat_dist: nan, mix.decode.loss_seg: nan, mix.decode.acc_seg: 69.9605\n2022-05-07 17:06:32,717 - mmseg - INFO - Iter [150/40000]       lr: 5.938e-06, eta: 1 day, 0:00:44, time: 2.150, data_time: 0.017, memory: 9801, decode.loss_seg: nan, decode.acc_seg: 41.6272, src.loss_imnet_feat_dist: nan, mix.decode.loss_seg: nan, mix.decode.acc_seg: 69.3706\n2022-05-07 17:08:19,966 - mmseg - INFO - Iter [200/40000]       lr: 7.920e-06, eta: 23:54:54, time: 2.145, data_time: 0.017, memory: 9801, decode.loss_seg: nan, decode.acc_seg: 42.4247, src.loss_imnet_feat_dist: nan, mix.decode.loss_seg: nan, mix.decode.acc_seg: 71.1068\n",
            "loss_divergence",
            "loss-nan",
            "train.log",
        ),
        # Peterande/D-FINE#311 (case 5415): Thin: D-FINE training on a custom dataset with Mosaic/Cutmix and num_workers>1 ends in an NCCL timeout (title, in Chinese); the excerpt keeps only epoch-27 ...
        (
            "Epoch: [27]  [ 500/1352]  eta: 0:13:43  lr: 0.000013  loss: 29.9395 (28.6905)\n训练自定义数据集+Mosaic/Cutmix+num_workers>1 NCCL超时\n",
            "nccl_timeout",
            "nccl-timeout-in-words",
            "train.log",
        ),
        # Peterande/D-FINE#118 (case 5417): D-FINE on two A100s, torch 2.0.1, batch 4 at 1920x1920: title 'WorkNCCL(SeqNum=5125, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1807734 millisecond'; ...
        (
            "Epoch: [0]  [    0/50108]  eta: 1 day, 20:54:44  lr: 0.000000  loss: 63.1246 (63.1246)  loss_bbox: 1.3422 (1.3422)  loss_bbox_aux_0: 1.4365 (1.4365)\nWorkNCCL(SeqNum=5125, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1807734 millisecond\n",
            "nccl_timeout",
            "nccl-watchdog-timeout",
            "train.log",
        ),
        # TrackNetV4/TrackNetV4#3 (case 5418): Thin: TrackNetV4 (Keras) training prints many per-clip predict progress bars and then 'Training gets Killed' (title; the Killed line itself is not in the ...
        (
            "15/15 ━━━━━━━━━━━━━━━━━━━━ 0s 20ms/step\n39/39 ━━━━━━━━━━━━━━━━━━━━ 1s 20ms/step\n67/67 ━━━━━━━━━━━━━━━━━━━━ 1s 21ms/step\n47/47 ━━━━━━━━━━━━━━━━━━━━ 1s 20ms/step\n139/139 ━━━━━━━━━━━━━━━━━━━━ 3s 20ms/step\n176/176 ━━━━━━━━━━━━━━━━━━━━ 4s 20ms/step\n[Bug] Training gets Killed\n",
            "host_oom",
            "killed-in-words",
            "train.log",
        ),
        # PaddlePaddle/Paddle#19537 (case 5421): Thin: a PaddlePaddle model trained on a P40 (CUDA 8, cuDNN 7, paddle develop built from source) stops with 'cuda error 4' (the full text is only in a ...
        (
            "cuda error 4\n不知什么原因，模型训练会出cuda 4error\n环境：\nCUDA8 CUDNN7 P40机器 最新编译develop版本paddle\n",
            "cuda_error",
            "cuda-error-number",
            "train.log",
        ),
        # PaddlePaddle/PaddleDetection#5901 (case 5422): Thin: PaddleDetection training stops suddenly with '(External) CUDA error(719)' (cudaErrorLaunchFailure); only the title carries the error, nothing points ...
        (
            "训练的是突然出现(External) CUDA error(719),错误\n@qingqing01 帮忙分析下，可能的原因么？\n",
            "cuda_error",
            "cuda-error-number",
            "train.log",
        ),
        # PaddlePaddle/Paddle#14111 (case 5423): PaddleCloud training of the dssm model with use_gpu=False fails with 'CUDA driver version is insufficient for CUDA runtime': the cloud image carried a CUDA ...
        (
            "cpu训练报错：CUDA driver version is insufficient for CUDA runtime\n",
            "import_error",
            "driver-does-not-fit",
            "train.log",
        ),
        # apache/mxnet#10323 (case 5427): A user's MXNet text-CNN training fails in asscalar() with MXNetError 'Check failed: err == cudaSuccess (2 vs. 0) Name: mxnet_generic_kernel ErrStr:out of ...
        (
            'File "textcnn.py", line 179, in <module>\n    curr_loss = nd.mean(loss_result).asscalar()\n  File "/home/ubuntu/anaconda3/envs/python3/lib/python3.6/site-packages/mxnet/ndarray/ndarray.py", line 1894, in asscalar\n    return self.asnumpy()[0]\n  File "/home/ubuntu/anaconda3/envs/python3/lib/python3.6/site-packages/mxnet/ndarray/ndarray.py", line 1876, in asnumpy\n    ctypes.c_size_t(data.size)))\n  File "/home/ubuntu/anaconda3/envs/python3/lib/python3.6/site-packages/mxnet/base.py", line 149, in check_call\n    raise MXNetError(py_str(_LIB.MXGetLastError()))\nmxnet.base.MXNetError: [17:13:00] src/operator/nn/./../mxnet_op.h:576: Check failed: err == cudaSuccess (2 vs. 0) Name: mxnet_generic_kernel ErrStr:out of memory\n\nStack trace returned 10 entries:\n[bt] (0) /home/ubuntu/anaconda3/envs/python3/lib/python3.6/site-packages/mxnet/libmxnet.so(+0x31f81a) [0x7f62d1b6d81a]\n[bt] (1) /home/ubuntu/anaconda3/envs/python3/lib/python3.6/site-packages/mxnet/libmxnet.so(+0x31fe41) [0x7f62d1b6de41]\n[bt] (2) /home/ubuntu/anaconda3/envs/python3/lib/python3.6/site-packages/mxnet/libmxnet.so(+0x2c59657) [0x7f62d44a7657]\n[bt] (3) /home/ubuntu/anaconda3/envs/python3/lib/python3.6/site-packages/mxnet/libmxnet.so(+0x2c61e5e) [0x7f62d44afe5e]\n',
            "gpu_oom",
            "cuda-oom",
            "train.log",
        ),
        # apache/mxnet#2913 (case 5428): MXNet 0.7 multi-label training (train_mynet.py via model.fit/_train_multi_device) fails while binding executors with ...
        (
            '[19:03:47] /home/deeper/mxnet/dmlc-core/include/dmlc/./logging.h:235: [19:03:47] src/storage/./pooled_storage_manager.h:62: Memory allocation failed.\nTraceback (most recent call last):\n  File "train_mynet.py", line 90, in <module>\n    train_model.fit(args, net, get_iterator)\n  File "/home/deeper/77W-project/net/train_model.py", line 100, in fit\n    epoch_end_callback = checkpoint)\n  File "/home/deeper/anaconda/lib/python2.7/site-packages/mxnet-0.7.0-py2.7.egg/mxnet/model.py", line 789, in fit\n    sym_gen=self.sym_gen)\n  File "/home/deeper/anaconda/lib/python2.7/site-packages/mxnet-0.7.0-py2.7.egg/mxnet/model.py", line 192, in _train_multi_device\n    logger=logger)\n  File "/home/deeper/anaconda/lib/python2.7/site-packages/mxnet-0.7.0-py2.7.egg/mxnet/executor_manager.py", line 311, in __init__\n    self.slices, train_data)\n  File "/home/deeper/anaconda/lib/python2.7/site-packages/mxnet-0.7.0-py2.7.egg/mxnet/executor_manager.py", line 224, in __init__\n    shared_data_arrays=self.shared_data_arrays[i])\n',
            "gpu_oom",
            "cuda-oom",
            "train.log",
        ),
        # deepinsight/insightface#115 (case 5429): Thin: insightface r50 training on four Titan Xp (85164 classes, per_batch_size=1) runs out of memory right after cuDNN autotuning starts; the log is cut ...
        (
            "gpu num: 4\nnum_layers 50\nimage_size [112, 112]\nnum_classes 85164\ninit resnet 50\n0 1 E 3 prelu\nINFO:root:loading recordio datasets/faces_ms1m_112x112/train.rec...\nheader0 label [ 3804847.  3890011.]\nid2range 85164\n3804846\nrand_mirror 1\nloading bin 0\nloading bin 11000\n(12000L, 3L, 112L, 112L)\nver lfw\nlr_steps [12800000, 17920000, 20480000]\n[10:02:31] src/operator/nn/./cudnn/./cudnn_algoreg-inl.h:107: Running performance tests to find the best convol\nout of memory when run with four Titanxp even per-batch-size is 1\n",
            "gpu_oom",
            "oom-in-words",
            "train.log",
        ),
        # chainer/chainer#2360 (case 5439): Chainer MNIST example from a source checkout with --gpu 0 fails at get_device: 'RuntimeError: CUDA environment is not correctly set up ... CuPy is not ...
        (
            '/usr/bin/python2.7 /home/s/myproject/chainer/chainer-master/examples/mnist/train_mnist.py\nUsing gpu device 0: GeForce GTX 960 (CNMeM is disabled, cuDNN 5005)\nGPU: 0\n# unit: 1000\n# Minibatch-size: 100\n# epoch: 20\n\nTraceback (most recent call last):\n  File "/home/s/myproject/chainer/chainer-master/examples/mnist/train_mnist.py", line 125, in <module>\n    main()\n  File "/home/s/myproject/chainer/chainer-master/examples/mnist/train_mnist.py", line 64, in main\n    chainer.cuda.get_device(args.gpu).use()  # Make a specified GPU current\n  File "/home/s/myproject/chainer/chainer-master/chainer/cuda.py", line 179, in get_device\n    check_cuda_available()\n  File "/home/s/myproject/chainer/chainer-master/chainer/cuda.py", line 84, in check_cuda_available\n    raise RuntimeError(msg)\nRuntimeError: CUDA environment is not correctly set up\n(see https://github.com/pfnet/chainer#installation).CuPy is not correctly installed. Please check your environment, uninstall Chainer and reinstall it with `pip install chainer --no-cache-dir -vvvv`.\n\noriginal error: cannot import name core\n\nProcess finished with exit code 1\n',
            "import_error",
            "import-name-bare",
            "train.log",
        ),
        # takumayagi/fpl#3 (case 5441): Thin: the fpl (future person localization) code on Chainer v4 / CUDA 8 / Titan X fails whenever chainer's cuda is imported: 'cannot import name ...
        (
            "Still whenever i import cuda from chainer, I get the following error-\n\ncannot import name 'sqrt_fixed'.\n",
            "import_error",
            "import-name-bare",
            "train.log",
        ),
        # microsoft/CNTK#1835 (case 5443): A source-built CNTK GPU runs FeedForwardNet.py on the CPU but fails at try_set_default_device(cntk.device.gpu(0)) with 'ValueError: Specified GPU device id ...
        (
            'Traceback (most recent call last):\n  File "FeedForwardNet.py", line 82, in <module>\n    try_set_default_device(cntk.device.gpu(0))\n  File "/CNTK/bindings/python/cntk/internal/swig_helper.py", line 69, in wrapper\n    result = f(*args, **kwds)\n  File "/CNTK/bindings/python/cntk/device.py", line 94, in gpu\n    return cntk_py.DeviceDescriptor.gpu_device(device_id)\nValueError: Specified GPU device id (0) is invalid.\n',
            "argument_error",
            "invalid-device-ordinal",
            "train.log",
        ),
        # PaddlePaddle/PaddleDetection#7380 (case 5444): Thin: PaddleDetection tinypose training under paddle.distributed.launch in an NCCL 2.8.4 container; the launcher only reports 'Pod failed' and 'Container ...
        (
            "I1121 02:35:53.560647 3004662 tcp_store.cc:257] receive shutdown event and so quit from MasterDaemon run loop\nLAUNCH INFO 2022-11-21 02:35:54,384 Pod failed\nLAUNCH ERROR 2022-11-21 02:35:54,385 Container failed !!!\nContainer rank 0 status failed cmd ['/usr/bin/python3', '-u', 'tools/train.py', '-c', 'configs/keypoint/tiny_pose/tinypose_256x192_wholebody-v2-0921-1021-1108-1121.yml', '--eval'] code 1 log log/workerlog.0\nNCCL ERROR-- training bug!\n",
            "nccl_error",
            "nccl-error-in-words",
            "launch.log",
        ),
        # facebookresearch/fairseq-lua#57 (case 5448): Lua fairseq fconv training on a custom autoencoder corpus, 16000 updates in: cutorch's THCTensorIndex.cu:321 indexSelect kernel assertion 'srcIndex < ...
        (
            '> fairseq train -sourcelang source -targetlang target -datadir fairseq-data-bin/simple-wikipedia-autoencoder -model fconv -nenclayer 4 -nlayer 3 -dropout 0.2 -optim nag -lr 0.25 -clip 0.1 -momentum 0.99 -timeavg -bptt 0 -savedir fairseq-fconv-model\n| [target] Dictionary: 18961 types\n| [source] Dictionary: 16324 types\n| IndexedDataset: loaded fairseq-data-bin/simple-wikipedia-autoencoder with 5238230 examples\n| IndexedDataset: loaded fairseq-data-bin/simple-wikipedia-autoencoder with 291010 examples\n| epoch 000 | 0001000 updates | words/s   16573| trainloss     5.45 | train ppl    43.58\n| epoch 000 | 0016000 updates | words/s   18023| trainloss     1.39 | train ppl     2.62\n/home/matthias/torch/extra/cutorch/lib/THC/THCTensorIndex.cu:321: void indexSelectLa\nCUDA error "Assertion `srcIndex < srcSelectDimSize` failed"\n',
            "framework_error",
            "native-abort",
            "train.log",
        ),
        # OpenNMT/OpenNMT-py#1825 (case 5455): OpenNMT-py 1.x on Windows, 'python train.py -data data/demo ... -gpu_ranks 0': the traceback through trainer._gradient_accumulation into model.forward is ...
        (
            '[2020-07-08 13:02:52,367 INFO] encoder: 28047000\n[2020-07-08 13:02:52,371 INFO] decoder: 28529749\n[2020-07-08 13:02:52,372 INFO] * number of parameters: 56576749\n[2020-07-08 13:02:52,374 INFO] Starting training on GPU: [0]\n[2020-07-08 13:02:52,374 INFO] Start training loop and validate every 10000 steps...\n[2020-07-08 13:02:52,374 INFO] Loading dataset from data\\demo.train.0.pt\n[2020-07-08 13:02:54,248 INFO] number of examples: 122206\nTraceback (most recent call last):\n  File "train.py", line 6, in <module>\n    main()\n  File "D:\\OpenNMT-py\\onmt\\bin\\train.py", line 209, in main\n    train(opt)\n  File "D:\\OpenNMT-py\\onmt\\bin\\train.py", line 91, in train\n    single_main(opt, 0)\n  File "D:\\OpenNMT-py\\onmt\\train_single.py", line 146, in main\n    valid_steps=opt.valid_steps)\n  File "D:\\OpenNMT-py\\onmt\\trainer.py", line 265, in train\n    report_stats)\n  File "D:\\OpenNMT-py\\onmt\\trainer.py", line 388, in _gradient_accumulation\n    with_align=self.with_align)\n  File "C:\\Users\\84946\\.conda\\envs\\tf-gpu\\lib\\site-packages\\torch\\nn\\modules\\module.py", line 550, in __call__\n    result = self.forward(*input, **kwargs)\n  File "D:\\OpenNMT-py\\onmt\\models\\model.py", line 51, in forward\n    with_align=with_align)\nCUDA: Out of memory\n',
            "gpu_oom",
            "cuda-oom",
            "train.log",
        ),
        # awslabs/sockeye#206 (case 5466): Sockeye GRU/attention training on GPU: MXNet's storage.cc says 'Compile with USE_CUDA=1 to enable GPU usage' as parameters are first placed on the device: ...
        (
            "train_model/Attention.dot+LatentDim.1024+RnnCell.gru: [INFO:sockeye.loss] Loss: CrossEntropy(normalization_type=valid, label_smoothing=0.0)\ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: [INFO:sockeye.training] Using bucketing. Default max_seq_len=(100, 100)\ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: [INFO:__main__] Optimizer: adam\ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: [INFO:__main__] Optimizer Parameters: {'wd': 0.0, 'learning_rate': 0.0003, 'lr_scheduler': LearningRateSchedulerPlateauReduce(reduce_factor=0.50, reduce_num_not_improved=0), 'clip_gradient': 1.0, 'rescale_grad': 1.0}\ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: [INFO:__main__] kvstore: device\ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: [INFO:sockeye.model] Saved config to \"/data/philip/variational-latent-variable/train_model/Attention.dot+LatentDim.1024+RnnCell.gru/model/config\"\ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: [06:58:53] /home/travis/build/dmlc/mxnet-distro/mxnet-build/dmlc-core/include/dmlc/logging.h:308: [06:58:53] src/storage/storage.cc:113: Compile with USE_CUDA=1 to enable GPU usage\ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: \ntrain_model/Attention.dot+LatentDim.1024+RnnCell.gru: Stack trace returned 10 entries:\n",
            "import_error",
            "gpu-support-absent",
            "train.log",
        ),
        # mozilla/translations#1002 (case 5469): Firefox Translations 'train backwards' Marian task on a GCP GPU worker: 51000 updates of normal training, then "Error: CUDA error 999 'unknown error' - ...
        (
            "[task 2025-01-21T16:24:56.313Z] [2025-01-21 16:24:56] [valid] Ep. 1 : Up. 50000 : ce-mean-words : 2.62238 : new best\n[task 2025-01-21T16:25:04.482Z] [2025-01-21 16:25:04] Saving model weights and runtime parameters to /home/ubuntu/tasks/task_173745859288754/artifacts/model.npz.best-bleu-detok.npz\n[task 2025-01-21T16:25:07.208Z] [2025-01-21 16:25:07] [valid] Ep. 1 : Up. 50000 : bleu-detok : 26.4729 : new best\n[taskcluster 2025-01-21T16:29:14.968Z] [taskcluster-proxy] Successfully refreshed taskcluster-proxy credentials: task-client/cxEF3FOvRLOjJJSv7n8hXQ/0/on/us-central1-b/6805228967535197264/until/1737478154.931\n[task 2025-01-21T16:30:34.200Z] [2025-01-21 16:30:34] Ep. 1 : Up. 51000 : Sen. 77,303,338 : Cost 1.41794586 : Time 370.55s : 97447.45 words/s : gNorm 0.5275\n[task 2025-01-21T16:30:37.188Z] [2025-01-21 16:30:37] Error: CUDA error 999 'unknown error' - /builds/worker/fetches/marian-source/src/tensors/gpu/algorithm.cu:54: cudaStreamSynchronize(0)\n",
            "cuda_error",
            "cuda-error-number",
            "live.log",
        ),
        # open-mmlab/mmaction2#1450 (case 5473): mmaction2 2s-AGCN (2sagcn_80e_ntu60_xsub_keypoint_3d) distributed training: the kept excerpt is C++ frames ending in Py_FinalizeEx and ...
        (
            "frame #11: <unknown function> + 0xfad7c (0x5625331f8d7c in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #12: <unknown function> + 0xfad7c (0x5625331f8d7c in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #13: <unknown function> + 0xfad7c (0x5625331f8d7c in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #14: <unknown function> + 0xfad7c (0x5625331f8d7c in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #15: <unknown function> + 0xfad7c (0x5625331f8d7c in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #16: <unknown function> + 0xfad7c (0x5625331f8d7c in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #17: <unknown function> + 0x12b327 (0x562533229327 in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #18: PyDict_SetItemString + 0x89 (0x562533235e59 in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #19: PyImport_Cleanup + 0xab (0x5625332aad0b in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #20: Py_FinalizeEx + 0x64 (0x56253331f304 in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #21: <unknown function> + 0x232960 (0x562533330960 in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nframe #22: _Py_UnixMain + 0x3c (0x562533330ccc in /home/sysadmin/anaconda3/envs/open-mmlab/bin/python)\nTraceback (most recent call last):\n  File \"/home/sysadmin/anaconda3/envs/open-mmlab/lib/python3.7/site-packages/torch/distributed/launch.py\", line 260, in <module>\n    main()\n  File \"/home/sysadmin/anaconda3/envs/open-mmlab/lib/python3.7/site-packages/torch/distributed/launch.py\", line 256, in main\n    cmd=cmd)\nsubprocess.CalledProcessError: Command '['/home/sysadmin/anaconda3/envs/open-mmlab/bin/python', '-u', './tools/train.py', '--local_rank=7', 'configs/skeleton/2s-agcn/2sagcn_80e_ntu60_xsub_keypoint_3d.py', '--launcher', 'pytorch', '--validate', '--seed', '0', '--deterministic']' died with <Signals.SIGABRT: 6>.\n(open-mmlab) [sysadmin@traininglab mmaction2]$\n",
            "framework_error",
            "native-crash-reported",
            "train.log",
        ),
        # facebookresearch/SlowFast#664 (case 5474): PySlowFast MViTv2_B_32x3 fine-tuning on a custom Kinetics-style dataset with DECODING_BACKEND torchvision; the error is only the title 'Failed to load video ...
        (
            'TRAIN:\n  ENABLE: True\n  DATASET: kinetics\n  BATCH_SIZE: 1 # Increased from 2 for better efficiency and learning\n  EVAL_PERIOD: 10\n  CHECKPOINT_PERIOD: 10\n  AUTO_RESUME: True\n  CHECKPOINT_EPOCH_RESET: True\n  CHECKPOINT_FILE_PATH: "/slowfast/models/MViTv2_B_32x3_k400_f304025456.pyth"\n  CHECKPOINT_IN_INIT: True\nDATA:\n  USE_OFFSET_SAMPLING: True\n  DECODING_BACKEND: torchvision\n  NUM_FRAMES: 32\n  SAMPLING_RATE: 1\n  TRAIN_JITTER_SCALES: [256, 320]\n  TRAIN_CROP_SIZE: 224\n  TEST_CROP_SIZE: 224\n  INPUT_CHANNEL_NUM: [3]\n  PATH_TO_DATA_DIR: "models/datasets/custom_data/" # csv files location from which it will get this, path_to_video_1 label_1\nFailed to load video after 10 retries\n',
            "dataloader_error",
            "video-load-failed",
            "train.log",
        ),
        # sunlicai/MAE-DFER#10 (case 5478): MAE-DFER (VideoMAE-based) fine-tuning that worked on a small set fails on a larger one right at 'Start training': the dataset prints "Error 'list index out ...
        (
            "optimizer settings: {'lr': 3.125e-05, 'weight_decay': 0.0, 'eps': 1e-08, 'betas': [0.9, 0.999]}\nUse step level LR scheduler!\nSet warmup steps = 745\nSet warmup steps = 0\nMax WD = 0.0500000, Min WD = 0.0500000\ncriterion = SoftTargetCrossEntropy()\nAuto resume checkpoint: \nStart training for 100 epochs\n==> Note: Error 'list index out of range' occurred when load video of '/opt/data/private/dataset_5clip_10s/train/1/1680777543675809792/4'!!!\nTraceback (most recent call last):\n  File \"/usr/lib/python3.6/runpy.py\", line 193, in _run_module_as_main\n    \"__main__\", mod_spec)\n  File \"/usr/lib/python3.6/runpy.py\", line 85, in _run_code\n    exec(code, run_globals)\n  File \"/usr/local/lib/python3.6/dist-packages/torch/distributed/launch.py\", line 260, in <module>\n    main()\n  File \"/usr/local/lib/python3.6/dist-packages/torch/distributed/launch.py\", line 256, in main\n    cmd=cmd)\nsubprocess.CalledProcessError: Command '['/usr/bin/python3', '-u', 'run_class_finetuning.py', '--local_rank\n",
            "dataloader_error",
            "video-load-failed",
            "train.log",
        ),
        # Pang-Yatian/Point-MAE#26 (case 5479): Point-MAE fine-tuning on ScanObjectNN objbg/objonly: 'RuntimeError: 0D or 1D target tensor expected, multi-target not supported' from torch's ...
        (
            "return torch._C._nn.cross_entropy_loss(input, target, weight, _Reduction.get_enum(reduction), ignore_index, label_smoothing)\nRuntimeError: 0D or 1D target tensor expected, multi-target not supported.\n",
            "script_error",
            "layer-input-shape",
            "train.log",
        ),
        # MCG-NJU/MOTIP#52 (case 5480): MOTIP training on 8 V100 crashes after ~3800/5000 iterations: the reporter quotes 'RuntimeError: unable to mmap ... Cannot allocate memory (12)' from the ...
        (
            "RuntimeError: unable to mmap ... Cannot allocate memory (12) pytorch\n[rank0]:[E421 01:04:30.934157590 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=93202, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600041 milliseconds before timing out.\n[rank0]:[E421 01:04:30.934629241 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: 93202, last enqueued NCCL work: 93202, last completed NCCL work: 93201.\n[rank2]:[E421 01:04:30.128876174 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 2] Timeout at NCCL work: 93201, last enqueued NCCL work: 93201, last completed NCCL work: 93200.\n[rank2]:[E421 01:04:30.128933938 ProcessGroupNCCL.cpp:630] [Rank 2] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.\n[rank2]:[E421 01:04:30.128945616 ProcessGroupNCCL.cpp:636] [Rank 2] To avoid data inconsistency, we are taking the entire process down.\n[rank2]:[E421 01:04:30.130984228 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 2] Process group watchdog thread terminated with exception: [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=93201, OpType=BROADCAST,\n",
            "dataloader_error",
            "dataloader",
            "train.log",
        ),
        # hirotomusiker/CLRerNet#40 (case 5481): CLRerNet (mmdet 2.x) lane-detection training on CULane, ~22 s/iter in epoch 1; the kept log lines are normal progress and the failure is the title ...
        (
            "2024-05-22 21:07:18,021 - mmdet - INFO - workflow: [('train', 1)], max: 15 epochs\n2024-05-22 21:07:18,022 - mmdet - INFO - Checkpoints will be saved to /work/work_dirs/clrernet_culane_dla34 by HardDiskBackend.\n2024-05-22 21:44:11,176 - mmdet - INFO - Epoch [1][100/2321]    lr: 6.000e-04, eta: 8 days, 21:23:42, time: 22.129, data_time: 0.108, memory: 7316, loss_cls: 1.4577, loss_reg_xytl: 4.2272, loss_iou: 3.1644, loss_seg: 0.7483, loss: 9.5976\n2024-05-22 22:20:47,725 - mmdet - INFO - Epoch [1][200/2321]    lr: 6.000e-04, eta: 8 days, 19:59:34, time: 21.966, data_time: 0.102, memory: 7316, loss_cls: 0.6684, loss_reg_xytl: 1.1171, loss_iou: 1.7489, loss_seg: 0.4764, loss: 4.0107\n2024-05-22 22:57:20,463 - mmdet - INFO - Epoch [1][300/2321]    lr: 5.999e-04, eta: 8 days, 18:59:48, time: 21.927, data_time: 0.046, memory: 7316, loss_cls: 0.5934, loss_reg_xytl: 0.7888, loss_iou: 1.3565, loss_seg: 0.4259, loss: 3.1646\n2024-05-22 23:33:56,920 - mmdet - INFO - Epoch [1][400/2321]    lr: 5.998e-04, eta: 8 days, 18:16:57, time: 21.964, data_time: 0.052, memory: 7316, loss_cls: 0.5567, loss_reg_xytl: 0.6247, loss_iou: 1.2230, loss_seg: 0.3952, loss: 2.7996\nDataLoader worker killed\n",
            "host_oom",
            "killed-in-words",
            "train.log",
        ),
        # open-mmlab/mmdetection#420 (case 5482): mmdetection training on Mapillary (COCO and Cityscapes train fine): 'RuntimeError: DataLoader worker (pid 34569) is killed by signal' with the signal's name ...
        (
            "RuntimeError: DataLoader worker (pid 34569) is killed by signal\n",
            "dataloader_error",
            "dataloader",
            "train.log",
        ),
        # hpcaitech/Open-Sora#600 (case 5483): Open-Sora training on images and videos together (either alone works; very long videos suspected): title 'RuntimeError: DataLoader worker (pid 3377964)is ...
        (
            "RuntimeError: DataLoader worker (pid 3377964)is killed by signal: Killed\n",
            "host_oom",
            "kernel-oom-killer",
            "train.log",
        ),
        # fundamentalvision/BEVFormer#55 (case 5487): BEVFormer-base training with batch_size 2: traceback through mmcv's OptimizerHook into runner.outputs['loss'].backward(), the excerpt cut there; the title ...
        (
            'Traceback (most recent call last):\n  File "./tools/train.py", line 259, in <module>\n    main()\n  File "./tools/train.py", line 248, in main\n    custom_train_model(\n  File "/home/JJ_Group/wangz/wangzhe21/BEVFormer_wzh/projects/mmdet3d_plugin/bevformer/apis/train.py", line 27, in custom_train_model\n    custom_train_detector(\n  File "/home/JJ_Group/wangz/wangzhe21/BEVFormer_wzh/projects/mmdet3d_plugin/bevformer/apis/mmdet_train.py", line 199, in custom_train_detector\n    runner.run(data_loaders, cfg.workflow)\n  File "/home/JJ_Group/wangz/.conda/envs/mmdet3d_v0.17.1/lib/python3.8/site-packages/mmcv/runner/epoch_based_runner.py", line 127, in run\n    epoch_runner(data_loaders[i], **kwargs)\n  File "/home/JJ_Group/wangz/.conda/envs/mmdet3d_v0.17.1/lib/python3.8/site-packages/mmcv/runner/epoch_based_runner.py", line 51, in train\n    self.call_hook(\'after_train_iter\')\n  File "/home/JJ_Group/wangz/.conda/envs/mmdet3d_v0.17.1/lib/python3.8/site-packages/mmcv/runner/base_runner.py", line 307, in call_hook\n    getattr(hook, fn_name)(self)\n  File "/home/JJ_Group/wangz/.conda/envs/mmdet3d_v0.17.1/lib/python3.8/site-packages/mmcv/runner/hooks/optimizer.py", line 35, in after_train_iter\n    runner.outputs[\'loss\'].backward()\nDataLoader worker is killed by signal: Killed\n',
            "host_oom",
            "kernel-oom-killer",
            "train.log",
        ),
        # facebookresearch/Detectron#560 (case 5492): Detectron (Caffe2) tools/train_net.py: RunNetOnce(param_init_net) in create_model fails with '[enforce fail at event_gpu.cc:17] error == cudaSuccess. 2 vs ...
        (
            'Traceback (most recent call last):\n  File "tools/train_net.py", line 128, in <module>\n    main()\n  File "tools/train_net.py", line 110, in main\n    checkpoints = detectron.utils.train.train_model()\n  File "/home/sd/Detectron/detectron/utils/train.py", line 54, in train_model\n    model, weights_file, start_iter, checkpoints, output_dir = create_model()\n  File "/home/sd/Detectron/detectron/utils/train.py", line 143, in create_model\n    workspace.RunNetOnce(model.param_init_net)\n  File "/usr/local/lib/python2.7/dist-packages/caffe2/python/workspace.py", line 199, in RunNetOnce\n    StringifyProto(net),\n  File "/usr/local/lib/python2.7/dist-packages/caffe2/python/workspace.py", line 178, in CallWithExceptionIntercept\n    return func(*args, **kwargs)\nRuntimeError: [enforce fail at event_gpu.cc:17] error == cudaSuccess. 2 vs 0. Error at: /home/sd/pytorch/caffe2/core/event_gpu.cc:17: out of memory \n',
            "gpu_oom",
            "cuda-oom",
            "train.log",
        ),
        # jwyang/faster-rcnn.pytorch#406 (case 5493): jwyang/faster-rcnn.pytorch trainval_net.py ResNet-101 on VOC, bs 1, nw 4 on GPU 2: title 'RuntimeError: cuda runtime error (2) :out of memory at ...
        (
            "CUDA_VISIBLE_DEVICES=2 python trainval_net.py \\\n                    --dataset pascal_voc --net res101 \\\n                    --bs 1 --nw 4 \\\n                    --lr 0.001 --lr_decay_step 5 \\\n                    --cuda\nRuntimeError: cuda runtime error (2) :out of memory at /pytorch/aten/src/THC/THCTensorRandom.cu:25\n",
            "gpu_oom",
            "cuda-library-oom",
            "train.log",
        ),
    ],
)
def test_round142_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


@pytest.mark.parametrize(
    "weak",
    [
        "Another NCCL error",
        "训练自定义数据集+Mosaic/Cutmix+num_workers>1 NCCL超时",
        "[Bug] Training gets Killed",
        "2023-06-25 03:50:47,533 - mmseg - INFO - Loaded 0 images",
        "cuda error 4",
    ],
)
def test_a_report_s_own_words_give_way_to_the_error_the_run_printed(weak: str) -> None:
    """Words in a title or a sentence are weak: an out-of-memory error the run printed is the answer."""
    text = f"{weak}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert reason_and_rule(text)[0] == "gpu_oom"


@pytest.mark.parametrize("number", [2, 35, 100, 101, 209, 710])
def test_cuda_error_numbers_that_name_no_device_fault_are_left_to_their_own_rules(number: int) -> None:
    assert reason_and_rule(f"(External) CUDA error({number}), something\n")[1] != "cuda-error-number"
    assert reason_and_rule(f"cuda error {number}\n")[1] != "cuda-error-number"


def test_a_syntax_message_is_read_only_in_syntaxerrors_own_form() -> None:
    """'invalid syntax' in prose is not a SyntaxError; with '(<file>.py, line N)' after it, it is."""
    assert reason_and_rule("RuntimeError: the config has invalid syntax near 'lr'\n")[1] != "syntax-message-carried"
    assert reason_and_rule("RuntimeError: loading failed: invalid syntax (gen_trainer.py, line 12)\n") == (
        "syntax_error",
        "syntax-message-carried",
    )
