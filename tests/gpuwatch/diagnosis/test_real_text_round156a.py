"""Classes of misses from issue 19's rounds one hundred and fifty-six to one hundred and sixty-one (corpus cases
5646-5787: reports found by generic queries, any framework: distributed training that stalls then fails, Docker and
rented cloud GPUs, Windows and WSL, the data side of training, large models and model parallelism, reproducing a
paper's training; taken as the search returned them). Error messages are verbatim from the public reports named in
each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # rwth-i6/returnn#1484 (case 5646): Thin, title only: RETURNN PyTorch multi-GPU training hangs in the all_reduce of _has_data and fails with the gloo transport's 'Timed out waiting 1800000ms ...
        (
            "PyTorch distributed training, hang in `all_reduce(_has_data ...`, after exception, Timed out waiting 1800000ms for send operation to complete\n",
            "nccl_timeout",
            "gloo-collective-timeout",
            "train.log",
        ),
        # tensorflow/benchmarks#230 (case 5648): Thin, title only: tf_cnn_benchmarks distributed training with 16 workers hangs and reports gRPC's 'Too many pings' (the server's GOAWAY to a client pinging ...
        (
            "benchmark distributed train with 16 workers hangs with error： Too many pings\n",
            "network_error",
            "grpc-too-many-pings",
            "train.log",
        ),
        # ultralytics/yolov5#7481 (case 5650): YOLOv5 DDP: rank 0 spends ~30 min caching images in RAM while rank 1 waits in a collective; the excerpt ends with '[E ProcessGroupNCCL.cpp:587] [Rank 1] ...
        (
            "  0%|          | 0/41999 [00:00<?, ?it/s]\nProcedure too long, omitted......\ntrain: Caching images (31.2GB ram):  85%|████████▍ | 35525/41999 [29:51<08:15, 13.06it/s]\ntrain: Caching images (31.2GB ram):  85%|████████▍ | 35528/41999 [29:52<09:18, 11.59it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35535/41999 [29:52<07:25, 14.50it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35538/41999 [29:52<07:44, 13.92it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35542/41999 [29:53<09:26, 11.39it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35546/41999 [29:53<08:25, 12.76it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35558/41999 [29:53<05:09, 20.81it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35561/41999 [29:53<06:43, 15.95it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35564/41999 [29:55<17:54,  5.99it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35587/41999 [29:56<07:13, 14.77it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35592/41999 [29:56<06:34, 16.24it/s]\ntrain: Caching images (31.3GB ram):  85%|████████▍ | 35595/41999 [29:57<08:39, 12.34it/s]\n[E ProcessGroupNCCL.cpp:587] [Rank 1] Watchdog c\n",
            "nccl_timeout",
            "nccl-watchdog-timeout",
            "train.log",
        ),
        # rwth-i6/returnn#314 (case 5658): RETURNN PyTorch single-node multi-GPU training hangs in epoch 33 after step 12 and fails with gloo's 'unbound_buffer.cc:81] Timed out waiting 1800...' ...
        (
            "...\nep 33 train, step 10, ctc_4 2.259, ctc_8 1.880, ctc 1.840, num_seqs 10, max_size:time 237360, max_size:out-spatial 52, mem_usage:cuda:1 6.6GB, 0.600 sec/step\nep 33 train, step 11, ctc_4 2.163, ctc_8 1.883, ctc 1.840, num_seqs 9, max_size:time 263648, max_size:out-spatial 57, mem_usage:cuda:3 6.6GB, 0.604 sec/step\nep 33 train, step 11, ctc_4 2.344, ctc_8 1.988, ctc 1.912, num_seqs 9, max_size:time 261801, max_size:out-spatial 55, mem_usage:cuda:2 6.5GB, 0.633 sec/step\nep 33 train, step 11, ctc_4 2.879, ctc_8 2.534, ctc 2.524, num_seqs 9, max_size:time 263648, max_size:out-spatial 54, mem_usage:cuda:0 6.7GB, 0.690 sec/step\nep 33 train, step 11, ctc_4 2.072, ctc_8 1.608, ctc 1.537, num_seqs 9, max_size:time 262065, max_size:out-spatial 55, mem_usage:cuda:1 6.6GB, 0.667 sec/step\nep 33 train, step 12, ctc_4 2.517, ctc_8 2.150, ctc 2.065, num_seqs 10, max_size:time 238480, max_size:out-spatial 55, mem_usage:cuda:1 6.6GB, 0.601 sec/step\nep 33 train, step 12, ctc_4 2.652, ctc_8 2.407, ctc 2.361, num_seqs 10, max_size:time 240000, max_size:out-spatial 59, mem_usage:cuda:0 6.7GB, 0.679 sec/step\nep 33 train, step 12, ctc_4 2.592, ctc_8 2.339, ctc 2.295, num_seqs 11, max_size:time 214632, max_size:out-spatial 59, mem_usage:cuda:2 6.5GB, 0.711 sec/step\nRuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800\n",
            "nccl_timeout",
            "gloo-collective-timeout",
            "train.log",
        ),
        # sarnikowski/bert_in_a_flask#5 (case 5673): BERT fine-tuning via 'make train GPU=1' in a docker container: docker run answers 'unknown flag: --gpus' and make stops with Error 125 (maintainer: docker ...
        (
            "(tfv2) dsdev@dsdev:~/gitrepo/bert_in_a_flask$ make train TENSORBOARD_PORT=6006 GPU=1\nunknown flag: --gpus\nSee 'docker run --help'.\nMakefile:19: recipe for target 'train' failed\nmake: *** [train] Error 125\n",
            "argument_error",
            "cli-unknown-flag",
            "train.log",
        ),
        # ultralytics/yolov5#1053 (case 5674): Thin: YOLOv5 train.py in the ultralytics/yolov5 docker image with --gpus all fails (trains fine on CPU); the traceback is only a screenshot, the title says ...
        (
            "CUDA error: no kernal image is available for execution\n",
            "import_error",
            "no-kernel-image",
            "train.log",
        ),
        # Wadaboa/titanet#7 (case 5678): Thin: TitaNet speaker-embedding training notebook on Google Colab (runs on the reporter's own computer); the Colab session always crashes, only a screenshot ...
        (
            "titanet.ipynb: session crashed for an unknown reason\n",
            "host_oom",
            "notebook-session-crashed",
            "train.log",
        ),
        # ultralytics/yolov5#4964 (case 5680): Thin: YOLOv5 training on 200000 images with 4 Tesla K80s; the error is a screenshot, the title quotes torch's DataLoader hint 'Please try to raise your ...
        (
            "Please try to raise your shared memory limit when start training\n",
            "dataloader_error",
            "dataloader",
            "train.log",
        ),
        # OpenHUTB/nn#6803 (case 5682): Thin: a medical image segmentation training Docker (nnU-Net/MONAI by the replies) keeps reporting 'CUDA out of memory'; only the reporter's sentence quotes ...
        (
            "跑不通那个医学图像分割的Docker，一直报CUDA out of memory怎么办\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # PaddlePaddle/PaddleSeg#939 (case 5688): PaddleSeg MscaleOCR training on two GPUs in docker (--shm-size already the machine's RAM) via paddle.distributed.launch: 'Nccl error, invalid data type, ...
        (
            'OSError: (External)  Nccl error, invalid data type, detail: Resource temporarily unavailable\nPlease try one of the following solutions:\n1. export NCCL_SHM_DISABLE=1;\n2. export NCCL_P2P_LEVEL=SYS;\n3. Increase shared memory by setting the -shm-size option when starting docker container, e.g., setting  -shm-size=2g.\n  (at /paddle/paddle/fluid/operators/collective/broadcast_op.cu.cc:65)\n  [operator < broadcast > error]\nterminate called without an active exception\n\n--------------------------------------\nC++ Traceback (most recent call last):\n--------------------------------------\n0   paddle::framework::SignalHandle(char const*, int)\n1   paddle::platform::GetCurrentTraceBackString[abi:cxx11]()\n\n----------------------\nError Message Summary:\n----------------------\nFatalError: `Process abort signal` is detected by the operating system.\n  [TimeInfo: *** Aborted at 1617366731 (unix time) try "date -d @1617366731" if you are using GNU date ***]\n  [SignalInfo: *** SIGABRT (@0x6941) received by PID 26945 (TID 0x7fbd52c03700) from PID 26945 ***]\n',
            "nccl_error",
            "paddle-nccl-error",
            "workerlog.0",
        ),
        # aws/amazon-sagemaker-examples#587 (case 5694): Thin: a SageMaker training job started from a free-tier notebook on an ml.m4.xlarge fails with 'ClientError: Please use a GPU instance for training' (the ...
        (
            "ClientError: Please use a GPU instance for training\n",
            "argument_error",
            "platform-needs-gpu-instance",
            "train.log",
        ),
        # chainer/chainer#42 (case 5695): Chainer's MNIST example on an AWS g2.2xlarge (one GPU) with --gpu 1: 'pycuda._driver.LogicError: cuDeviceGet failed: invalid device'; --gpu 0 works. The ...
        (
            '$ python chainer/examples/mnist/train_mnist.py --gpu 1\nTraceback (most recent call last):\n  File "chainer/examples/mnist/train_mnist.py", line 40, in <module>\n    cuda.init(args.gpu)\n  File "/home/ec2-user/anaconda/lib/python2.7/site-packages/chainer/cuda.py", line 119, in init\n    device  = Device(device)\npycuda._driver.LogicError: cuDeviceGet failed: invalid device\n',
            "argument_error",
            "invalid-device-ordinal",
            "train.log",
        ),
        # tracel-ai/burn#3315 (case 5696): Burn 'guide' example trained with the Cuda backend on WSL2 on an old GPU stops at once with DriverError(CUDA_ERROR_NOT_SUPPORTED, "operation not ...
        (
            'cargo run --bin train --release\nDriverError(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")\n',
            "cuda_error",
            "cuda-driver-error-status",
            "train.log",
        ),
        # JuliaGPU/CUDA.jl#860 (case 5698): Flux model on CUDA.jl under WSL: evaluating the loss on GPU arrays fails with NVMLError(NVML_ERROR_DRIVER_NOT_LOADED) and then signal (11): Segmentation ...
        (
            "julia> using Flux\n\njulia> using CUDA\n\njulia> W = cu(rand(2, 5)) # a 2×5 CuArray\n2×5 CuArray{Float32, 2}:\n 0.156762  0.5047    0.729    0.675644  0.7254\n 0.830276  0.232633  0.28608  0.081936  0.877452\n\njulia> b = cu(rand(2))\n2-element CuArray{Float32, 1}:\n 0.847873\n 0.4851537\n\njulia> predict(x) = W*x .+ b\npredict (generic function with 1 method)\n\njulia> loss(x, y) = sum((predict(x) .- y).^2)\nloss (generic function with 1 method)\n\njulia> x, y = cu(rand(5)), cu(rand(2)) # Dummy data\n(Float32[0.41799843, 0.23054601, 0.9759493, 0.09050545, 0.02653672], Float32[0.32672194, 0.067641534])\n\nloss(x, y) # ~ 3\nERROR: err = CUDA.NVML.NVMLError(CUDA.NVML.NVML_ERROR_DRIVER_NOT_LOADED)\nsignal (11): Segmentation fault\n",
            "import_error",
            "nvml-driver-not-loaded",
            "train.log",
        ),
        # bitsandbytes-foundation/bitsandbytes#52 (case 5700): DreamBooth training (nerdy rodent's guide) under WSL + Ubuntu fails at bitsandbytes' CUDA setup: 'CUDA SETUP: WARNING! libcuda.so not found! Do you have a ...
        (
            "CUDA SETUP: WARNING! libcuda.so not found! Do you have a CUDA driver installed? If you are on a cluster, make sure you are on a CUDA machine!\n",
            "import_error",
            "bitsandbytes-cpu-library",
            "train.log",
        ),
        # official-stockfish/nnue-pytorch#36 (case 5702): nnue-pytorch trainer on Windows 10: 'RuntimeError: Pinned memory requires CUDA. PyTorch splits its backend into two shared libraries ... the CUDA library ...
        (
            "(env) C:\\Users\\volodymyr\\Documents\\Sources\\nnue-pytorch>python train.py total_3m_d14.bin total_3m_d16_nnue.bin --lambda 1.0 --val_check_interval 2000 --threads 2 --batch-size 16384 --progress_bar_refresh_rate 20\nRuntimeError: Pinned memory requires CUDA. PyTorch splits its backend into two shared libraries: a CPU library and a CUDA library; this error has occurred because you are trying to use some CUDA functionality, but the CUDA library has not been loaded by the dynamic linker for some reason.  The CUDA library MUST be loaded, EVEN IF you don't directly use any symbols from the CUDA library! One common culprit is a lack of -INCLUDE:?warp_size@cuda@at@@YAHXZ in your link arguments; many dynamic linkers will delete dynamic library dependencies if you don't depend on any of their symbols.  You can check if this has occurred by using link on your binary to see if there is a dependency on *_cuda.dll library.\n",
            "import_error",
            "torch-cuda-library-not-loaded",
            "train.log",
        ),
        # IrisRainbowNeko/HCP-Diffusion#28 (case 5708): HCP-Diffusion training on Windows; the title quotes 'RuntimeError: Distributed package doesn't have NCCL bulit in' (sic); the maintainer: on Windows only ...
        (
            "RuntimeError: Distributed package doesn't have NCCL bulit in\n",
            "import_error",
            "torch-built-without",
            "train.log",
        ),
        # xingyizhou/CenterNet#649 (case 5716): CenterNet training on Windows with num_workers > 0 in the train DataLoader fails with "Can't pickle local object 'get_dataset.<locals>.Dataset" (spawned ...
        (
            "Can't pickle local object 'get_dataset.<locals>.Dataset\n",
            "dataloader_error",
            "dataset-not-picklable",
            "train.log",
        ),
        # pytorch/pytorch#4239 (case 5719): PyTorch 0.3 training on Windows with DataLoader workers: intermittent 'error in THAllocator.c:162 - MapViewOfFile returns 0x5 (ERROR_ACCESS_DENIED)' mapping ...
        (
            "[Windows] Intermittent error in THAllocator.c:162 - MapViewOfFile returns 0x5 (ERROR_ACCESS_DENIED)\n",
            "permission_error",
            "windows-access-denied",
            "train.log",
        ),
        # lfz/DSB2017#15 (case 5721): DSB2017 lung-nodule detector training on prepared DSB3+LUNA16 data on gpus 0,1: old torch (py2.7) DataLoader re-raises a worker's TypeError via ...
        (
            'using gpu 0,1\nTraceback (most recent call last):\n  File "/home/wisdom/soft/pycharm-community-2017.1/helpers/pydev/pydevd.py", line 1578, in <module>\n    globals = debugger.run(setup[\'file\'], None, None, is_module)\n  File "/home/wisdom/soft/pycharm-community-2017.1/helpers/pydev/pydevd.py", line 1015, in run\n    pydev_imports.execfile(file, globals, locals)  # execute the script\n  File "/home/wisdom/PycharmProjects/DSB2017-master/training/detector/main.py", line 348, in <module>\n    main()\n  File "/home/wisdom/PycharmProjects/DSB2017-master/training/detector/main.py", line 167, in main\n    train(train_loader, net, loss, epoch, optimizer, get_lr, args.save_freq, save_dir)\n  File "/home/wisdom/PycharmProjects/DSB2017-master/training/detector/main.py", line 179, in train\n    for i, (data, target, coord) in enumerate(data_loader):\n  File "/home/wisdom/anaconda3/envs/DSB2017/lib/python2.7/site-packages/torch/utils/data/dataloader.py", line 198, in __next__\n    return self._process_next_batch(batch)\n  File "/home/wisdom/anaconda3/envs/DSB2017/lib/python2.7/site-packages/torch/utils/data/dataloader.py", line 239, in _process_next_batch\n    raise batch.exc_type(batch.exc_msg)\nTypeError: Traceback (most recent call last):\n',
            "dataloader_error",
            "loader-worker-reraise",
            "train.log",
        ),
        # huggingface/nanoVLM#191 (case 5725): nanoVLM train.py with stream_dataset=True: loading the FineVision config from the Hub fails with urllib3 'ReadTimeoutError ... huggingface.co ... Read timed ...
        (
            "--- Train Config ---\nTrainConfig(lr_mp=0.00512, lr_vision_backbone=5e-05, lr_language_backbone=5e-05, val_size=50000, batch_size=2, gradient_accumulation_steps=8, max_grad_norm=1.0, eval_in_epochs=True, eval_interval=500, stats_log_interval=100, max_training_steps=40000, max_images_per_example=4, max_images_per_knapsack=18, max_sample_length=4096, compile=False, resume_from_vlm_checkpoint=False, train_dataset_path='HuggingFaceM4/FineVision_concat_shuffled_2', train_dataset_name=('default',), stream_dataset=True, relevance_min_rating=1, image_correspondence_min_rating=1, visual_dependency_min_rating=1, formatting_min_rating=1, wandb_entity='qsh-team', log_wandb=True, use_lmms_eval=True, lmms_eval_tasks='mmstar,mmmu_val,ocrbench,textvqa_val,docvqa_val,scienceqa,mme,infovqa_val,chartqa', lmms_eval_limit=None, lmms_eval_batch_size=64)\nGetting dataloaders from HuggingFaceM4/FineVision_concat_shuffled_2\nResize to max side len: True\nLoading dataset: default\nWarning: Failed to load dataset config 'default' from 'HuggingFaceM4/FineVision_concat_shuffled_2'. Error: (ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. (read timeout=10)\"), '(Request ID: 38f977ad-6afb-4cda-84c2-a842cb1f9ca9)')\nTraceback (most recent call last):\n  File \"/mnt/scratch/plays/nanoVLM/train.py\"\n",
            "network_error",
            "http-read-timeout",
            "train.log",
        ),
        # elchun/contact_graspnet_pytorch#10 (case 5728): contact_graspnet_pytorch training with num_workers=2 dies at epoch 0: glibc 'malloc_consolidate(): unaligned fastbin chunk detected' twice (the workers ...
        (
            'using 9996 meshes\nusing 9996 meshes\n**** EPOCH 000 ****\n   0%|          | 0/1500 [00:00<?, ?it/s]malloc_consolidate(): unaligned fastbin chunk detected\nmalloc_consolidate(): unaligned fastbin chunk detected\n   0%|          | 0/1500 [00:00<?, ?it/s]\nTraceback (most recent call last):\n  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data\n    data = self._data_queue.get(timeout=timeout)\n  File "/opt/conda/lib/python3.10/multiprocessing/queues.py", line 113, in get\n    if not self._poll(timeout):\n  File "/opt/conda/lib/python3.10/multiprocessing/connection.py", line 257, in poll\n    return self._poll(timeout)\n  File "/opt/conda/lib/python3.10/multiprocessing/connection.py", line 424, in _poll\n    r = wait([self], timeout)\n  File "/opt/conda/lib/python3.10/multiprocessing/connection.py", line 931, in wait\n    ready = selector.select(timeout)\n  File "/opt/conda/lib/python3.10/selectors.py", line 416, in select\n    fd_event_list = self._selector.poll(timeout)\n  File "/opt/conda/lib/python3.10/site-packages/torch/utils/data/_utils/signal_handling.py", line 66, in handler\n    _error_if_any_worker_fails()\nRuntimeError: DataLoader wor\n',
            "dataloader_error",
            "dataloader",
            "train.log",
        ),
        # crane-papercode/3DMedPT#10 (case 5729): Thin: 3DMedPT training; the title quotes torch's source line raising 'DataLoader worker (pid(s) {}) exited unexpectedly' (with num_workers=0 the run stops ...
        (
            "raise RuntimeError('DataLoader worker (pid(s) {}) exited unexpectedly'.format(pids_str))\n",
            "dataloader_error",
            "dataloader",
            "train.log",
        ),
        # mosaicml/streaming#740 (case 5741): Multi-GPU Fabric training with a StreamingDataset streamed from S3 (local=None) and StreamingDataLoader(num_workers=16): streaming raises 'ValueError: ...
        (
            "ValueError: Reused local directory: ['/tmp/31e2e930a4f34dcd7b91bdd397c87df4'] vs ['/tmp/31e2e930a4f34dcd7b91bdd397c87df4']. Provide a different one. If using a unique local directory, try deleting the local directory and call `streaming.base.util.clean_stale_shar\n",
            "dataloader_error",
            "streaming-reused-local-directory",
            "train.log",
        ),
        # ServiceNow/Fast-LLM#152 (case 5746): Fast-LLM continued pretraining of Mistral Nemo 12B from the HF checkpoint with tensor_parallel 4: 'Global counter mismatch for parameter ...
        (
            'Global counter mismatch for parameter "layers.1.norm_1.weight" and shard "weights": 20480 != 5120\n',
            "framework_error",
            "shard-counter-mismatch",
            "train.log",
        ),
        # OpenRLHF/OpenRLHF#858 (case 5759): Thin: OpenRLHF's default PPO script (Llama-3-8b actor + reward model, ZeRO-2, adam_offload, micro batch 1) on 4xA40 48G; the title says OOM and the stored ...
        (
            'Testing default PPO pipeline (LLama3-8b) OOM with 4x A40 48G\n+ deepspeed --module openrlhf.cli.train_ppo --pretrain /nas-data/workspace/pretrained_models/Llama-3-8b-sft-mixture --reward_pretrain /nas-data/workspace/pretrained_models/Llama-3-8b-rm-mixture --save_path ./checkpoint/Llama-3-8b-sft-mixture --micro_train_batch_size 1 --train_batch_size 4 --micro_rollout_batch_size 1 --rollout_batch_size 4 --zero_stage 2 --bf16 --adam_offload --flash_attn --load_checkpoint --gradient_checkpointing\n[rank0]: Traceback (most recent call last):\n[rank0]:   File "/workspace/miniconda3/envs/conda_venvyue/lib/python3.10/runpy.py", line 196, in _r\n',
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # haotian-liu/LLaVA#901 (case 5762): LLaVA pretrain stage resumed from its saved checkpoints: transformers' Trainer raises 'ValueError: No valid checkpoint found in output directory' although ...
        (
            "ValueError: No valid checkpoint found in output directory\n",
            "checkpoint_load_error",
            "resume-nothing-found",
            "train.log",
        ),
        # ymcui/Chinese-LLaMA-Alpaca-2#161 (case 5763): Thin: Chinese-LLaMA-Alpaca-2 continued pretraining (LoRA) restarted with resume_from_checkpoint; the title says the resume fails and the stored excerpt is ...
        (
            '使用resume_from_checkpoint参数继续预训练出错\n "base_model.model.model.layers.6.mlp.down_proj.weight", "base_model.model.model.layers.6.input_layernorm.weight", "base_model.model.model.layers.6.post_attention_layernorm.weight", "base_model.model.model.layers.7.self_attn.q_proj.weight", "base_model.model.model.layers.7.self_attn.k_proj.weight", "base_model.model.model.layers.7.self_attn.v_proj.weight", "base_model.model.model.layers.7.self_attn.o_proj.weight", "base_model.model.model.layers.7.self_attn.rotary_emb.inv_freq", "base_model.model.model.layers.7.mlp.gate_proj.weight", "base_model.model.model.layers.7.mlp.up_proj.weight", "base_model.model.model.layers.7.mlp.down_proj.weight", "base_model.model.model.layers.7.input_layernorm.weight", "base_model.model.model.layers.7.post_attention_layernorm.weight", "base_model.model.model.layers.8.self_attn.q_proj.weight", "base_model.model.model.layers.8.self_attn.k_proj.weight", "base_model.model.model.layers.8.self_attn.v_proj.weight", "base_model.model.model.layers.8.self_attn.o_proj\n.weight", "base_model.model.model.layers.8.self_attn.rotary_emb.inv_freq", "base_model.model.model.layers.8.mlp.gate_proj.weight", "base_model.model.model.layers.8.mlp.up_proj.weight", "base_model.model.model.layers.8.mlp.down_proj.weight", "base_model.model.model.layers.8.input_layernorm.weight", "base_model.model.model.layers.8.post_attention_layer\n',
            "checkpoint_load_error",
            "state-dict-key-list",
            "train.log",
        ),
        # McGill-NLP/llm2vec#145 (case 5765): llm2vec run_mntp.py MNTP training interrupted and restarted with resume_from_checkpoint: rank 0 fails with 'ValueError: Can't find a checkpoint index ...
        (
            "[rank0]: ValueError: Can't find a checkpoint index (pytorch_model.bin.index.json or model.safetensors.index.json) in XXX\n",
            "checkpoint_load_error",
            "resume-nothing-found",
            "train.log",
        ),
        # ChenmienTan/RL2#14 (case 5771): Thin: RL2 (RL post-training) run dies during training; the report's title is all the text the index keeps: 'CUDA Error: Invalid Argument During Training' ...
        (
            "CUDA Error: Invalid Argument During Training\n",
            "cuda_error",
            "cuda-fault",
            "train.log",
        ),
        # Haiyang-W/GiT#4 (case 5781): GiT single_detection_base via tools/dist_train.sh (1 GPU): the screenshot shows only torchrun's ChildFailedError; the reporter's follow-up quotes the cause, ...
        (
            'torch.distributed.elastic.multiprocessing.errors.ChildFailedError in tools/train.py\ni debug and find that the error "SyntaxError: Failed to format the config file" in train.py line123 "runner = Runner.from_cfg(cfg)" caused the ChildFailedError\n',
            "syntax_error",
            "syntax",
            "train.log",
        ),
    ],
)
def test_round156_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


def test_gloo_transport_errors_other_than_a_timeout_stay_the_networks() -> None:
    line = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer [10.0.0.2]:41234\n"
    assert reason_and_rule(line)[0] == "network_error"


def test_a_lowercase_cuda_error_from_a_plugin_keeps_its_own_reading() -> None:
    """The capitalised 'CUDA Error:' reading is not case-insensitive: Isaac Gym's 'Gym cuda error: invalid resource
    handle' after its failed CUDA preload stays the installation's (case 4244)."""
    text = (
        "*** Warning: failed to preload CUDA lib\n[Error] [carb.gym.plugin] Gym cuda error: invalid resource handle\n"
    )
    assert reason_and_rule(text)[1] != "cuda-fault"


@pytest.mark.parametrize("status", ["OUT_OF_MEMORY", "NO_DEVICE", "INVALID_DEVICE", "NO_BINARY_FOR_GPU"])
def test_cudarc_statuses_other_rules_read_are_left_to_them(status: str) -> None:
    assert reason_and_rule(f'DriverError(CUDA_ERROR_{status}, "x")\n')[1] != "cuda-driver-error-status"


def test_a_key_list_gives_way_to_the_error_the_run_printed() -> None:
    keys = '"a.weight", "b.weight", "c.bias", "d.weight"'
    text = f"{keys}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert reason_and_rule(text)[0] == "gpu_oom"
