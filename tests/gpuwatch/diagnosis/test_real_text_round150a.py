"""Classes of misses from issue 19's rounds one hundred and fifty to one hundred and fifty-five (corpus cases
5496-5645: reports found by generic queries, any framework: multi-GPU and multi-node failures, single-GPU crashes,
fine-tuning, clusters and cloud platforms, resumes and restarts, upgrades; taken as the search returned them). Error
messages are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # yongliang-wu/DFT#26 (case 5497): DFT fine-tuning launch script with a stray space before a line continuation: bash runs the next line as a command, 'data.max_length=2048: command not ...
        (
            "$ bash scripts/dft_train.sh\nscripts/dft_train.sh:line 15: data.max_length=2048: command not found\n",
            "file_not_found",
            "file-not-found",
            "train.log",
        ),
        # meta-llama/llama-cookbook#567 (case 5500): llama-cookbook multi-GPU fine-tuning on an EC2 instance 'fails under collective operation timeout': the excerpt keeps the ncclCommWatchdog frames and rank ...
        (
            "frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7f36762eadcc in /home/ec2-user/anaconda3/envs/pytorch_p310/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)\nframe #4: <unknown function> + 0xd3e95 (0x7f36c1d71e95 in /home/ec2-user/anaconda3/envs/pytorch_p310/bin/../lib/libstdc++.so.6)\nframe #5: <unknown function> + 0x744b (0x7f36cadd944b in /lib64/libpthread.so.0)\nframe #6: clone + 0x3f (0x7f36ca3cd52f in /lib64/libc.so.6)\n\nException raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1418 (most recent call first):\nframe #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f367500b897 in /home/ec2-user/anaconda3/envs/pytorch_p310/lib/python3.10/site-packages/torch/lib/libc10.so)\nframe #1: <unknown function> + 0xe32119 (0x7f3675f6e119 in /home/ec2-user/anaconda3/envs/pytorch_p310/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)\nframe #2: <unknown function> + 0xd3e95 (0x7f36c1d71e95 in /home/ec2-user/anaconda3/envs/pytorch_p310/bin/../lib/libstdc++.so.6)\nframe #3: <unknown function> + 0x744b (0x7f36cadd944b in /lib64/libpthread.so.0)\nframe #4: clone + 0x3f (0x7f36ca3cd52f in /lib64/libc.so.6)\n\n[rank2]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 2] Timeout at NCCL work: 1474236, last enqueued NCCL work: 1474236, last completed NCCL work: 1474235.\n",
            "nccl_timeout",
            "nccl-watchdog-timeout",
            "train.log",
        ),
        # deepspeedai/DeepSpeed#4845 (case 5505): Thin: BERT classification fine-tuning launched by deepspeed across nodes; every node, localhost included, gets 'errno: 110 - Connection timed out' at ...
        (
            "[BUG] Always get errno: 110 - Connection timed out when using deepspeed multi-node training.\n",
            "network_error",
            "etimedout-in-words",
            "train.log",
        ),
        # modelscope/ms-swift#2644 (case 5510): Thin: ms-swift multi-node multi-GPU run resumed with resume_from_checkpoint fails with 'assert len(self.ckpt_list) > 0' (the checkpoint loader found no ...
        (
            "多机多卡场景下resume_from_checkpoint，报错assert len(self.ckpt_list) > 0\n",
            "checkpoint_load_error",
            "resume-failed-weak",
            "train.log",
        ),
        # facebookresearch/Detectron#32 (case 5515): Thin: Detectron (Caffe2) multi-GPU training on Tesla M60s; the excerpt keeps only nvidia-smi and the title, 'multi-GPU training throw an illegal memory ...
        (
            "multi-GPU training throw an illegal memory access\n",
            "cuda_error",
            "cuda-fault",
            "train.log",
        ),
        # Nicozwy/CofCED#7 (case 5523): Thin: CofCED claim-verification training on a Quadro 6000 (24 GB) with 64 GB RAM is killed mid second epoch (batch 4660/5033); the reporter quotes PyCharm's ...
        (
            'my thread will be killed and the pycharm tips are like:"interrupted by signal 9: sigkill" I check my log in linux and it said cpu out of memory\n',
            "host_oom",
            "sigkill-in-text",
            "train.log",
        ),
        # facebookresearch/maskrcnn-benchmark#295 (case 5527): Thin, excerpt cut: Mask R-CNN training on one GPU with the 8-GPU learning rate (0.02 at batch 2); the report says 'Losses appear as nan in the middle of ...
        (
            "Losses appear as nan in the middle of training\n\nindex created!\n2018-12-20 20:53:27,127 maskrcnn_benchmark.trainer INFO: Start training\n2018-12-20 20:54:29,211 maskrcnn_benchmark.trainer INFO: eta: 3 days, 5:35:02  iter: 20  loss: 1.2211 (1.5259)  loss_classifier: 0.3178 (0.5123)  loss_box_reg: 0.0390 (0.0496)  loss_mask: 0.7223 (0.7687)  loss_objectness: 0.0829 (0.1821)  loss_rpn_box_reg: 0.0074 (0.0131)  time: 2.7855 (3.1041)  data: 0.0030 (0.2847)  lr: 0.007173  max mem: 2348\n2018-12-20 20:55:29,711 maskrcnn_benchmark.trainer INFO: eta: 3 days, 4:34:45  iter: 40  loss: 0.9601 (1.2970)  loss_classifier: 0.2422 (0.4144)  loss_box_reg: 0.0942 (0.0822)  loss_mask: 0.5431 (0.6802)  loss_objectness: 0.0304 (0.1088)  loss_rpn_box_reg: 0.0065 (0.0114)  time: 3.0272 (3.0645)  data: 0.0030 (0.1442)  lr: 0.007707  max mem: 2421\n2018-12-20 20:56:32,402 maskrcnn_benchmark.trainer INFO: eta: 3 days, 5:08:44  iter: 60  loss: 1.0016 (1.2237)  loss_classifier: 0.2760 (0.3928)  loss_box_reg: 0.0901 (0.0862)  loss_mask: 0.5242 (0.6391)  loss_objectness: 0.0445 (0.0937)  loss_rpn_box_reg: 0.0096 (0.0120)  time: 3.1236 (3.0879)  data: 0.0030 (0.0973)  lr: 0.008240  max mem: 2486\n",
            "loss_divergence",
            "loss-nan",
            "train.log",
        ),
        # ace-step/ACE-Step-1.5#120 (case 5533): Thin, excerpt cut: ACE-Step 1.5 LoRA training through Lightning Fabric fails in training_step with 'Offset increment outside graph capture encountered ...
        (
            "Error when LoRa training: Offset increment outside graph capture encountered unexpectedly\n\n  File \"/workspace/ACE-Step-1.5/acestep/training/trainer.py\", line 263, in train_from_preprocessed\n    yield from self._train_with_fabric(data_module, training_state, resume_from)\n               │    │                  │            │               └ None\n               │    │                  │            └ {'is_training': True, 'should_stop': False}\n               │    │                  └ <acestep.training.data_module.PreprocessedDataModule object at 0x7f8e3832c650>\n               │    └ <function LoRATrainer._train_with_fabric at 0x7f9452c8c400>\n               └ <acestep.training.trainer.LoRATrainer object at 0x7f91d0268e90>\n\n  File \"/workspace/ACE-Step-1.5/acestep/training/trainer.py\", line 431, in _train_with_fabric\n    loss = self.module.training_step(batch)\n           │    │      │             └ {'target_latents': tensor([[[ 1.5859,  0.1699, -0.7617,  ...,  1.5625, -0.2422,  0.3672],\n           │    │      │                        [-0.2109, -0.2461, -0.8555...\n           │    │      └ <function PreprocessedLoRAModule.training_step at 0x7f9452c8c220>\n           │    └ PreprocessedLoRAModule(\n           │        (model): AceStepConditionGenerationModel(\n           │          (decoder): _FabricModule(\n           │            (_forward_module): Pe...\n           └ <acestep.training.t\n",
            "framework_error",
            "cuda-graph-offset",
            "train.log",
        ),
        # mistralai/mistral-finetune#92 (case 5535): Thin, excerpt cut: mistral-finetune instruction fine-tuning under torchrun on an AWS g4dn.12xlarge (4 T4s) dies at the first attention call; the stored text ...
        (
            '    unsupported embed per head: 128\n[2024-08-18 10:18:08,858] torch.distributed.elastic.multiprocessing.api: [WARNING] Sending process 6934 closing signal SIGTERM\n[2024-08-18 10:18:10,074] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 1 (pid: 6935) of binary: /home/usr/mistral-finetune/mistenv/bin/python3.10\nTraceback (most recent call last):\n  File "/home/usr/mistral-finetune/mistenv/bin/torchrun", line 8, in <module>\n    sys.exit(main())\n  File "/home/usr/mistral-finetune/mistenv/lib/python3.10/site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 347, in wrapper\n    return f(*args, **kwargs)\n  File "/home/usr/mistral-finetune/mistenv/lib/python3.10/site-packages/torch/distributed/run.py", line 812, in main\n    run(args)\n  File "/home/usr/mistral-finetune/mistenv/lib/python3.10/site-packages/torch/distributed/run.py", line 803, in run\n    elastic_launch(\n  File "/home/usr/mistral-finetune/mistenv/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 135, in __call__\n    return launch_agent(self._config, self._entrypoint, list(args))\n  File "/home/usr/mistral-finetune/mistenv/lib/python3.10/site-packages/torch/distributed/launcher/api.py", line 268, in launch_agent\n',
            "import_error",
            "xformers-no-operator",
            "torchrun.log",
        ),
        # oandrienko/fast-semantic-segmentation#16 (case 5536): Thin: TensorFlow PSPNet and ICNet training from the README both end with 'Segmentation fault (core dumped)' and no other logs (a commenter sees it after a ...
        (
            "I was training both PSPNet and ICNet using the method provided from README, But Segmentation fault (core dumped) occured on both Net while training and no other logs.\n",
            "framework_error",
            "native-crash-in-words",
            "train.log",
        ),
        # matterport/Mask_RCNN#274 (case 5538): Thin: matterport Mask R-CNN (Keras/TF) training runs about 15 hours and then crashes with 'Segmentation fault (core dumpted)' and nothing else; commenters ...
        (
            "After training almost 15 hours correctly the training crashes ginving a Segmentation fault (core dumpted) and nothing else.\n",
            "framework_error",
            "native-crash-in-words",
            "train.log",
        ),
        # nianticlabs/monodepth2#340 (case 5542): Thin, excerpt cut: monodepth2 KITTI training submitted to a school HPC (LSF-style 'Resource usage summary', Tesla P100) prints 'Terminated' at a random ...
        (
            "Training model named:\n   mono_model\nModels and tensorboard events files are saved to:\n   ./logs\nTraining is using:\n   cuda\nUsing split:\n   eigen_zhou\nThere are 39810 training items and 4424 validation items\nTraining\nepoch   0 | batch      0 | examples/s:   1.2 | loss: 0.16949 | time elapsed: 00h00m33s | time left: 00h00m00s\nepoch   0 | batch    250 | examples/s:  16.2 | loss: 0.12577 | time elapsed: 00h07m38s | time left: 33h40m33s\nTerminated\n\nResource usage summary:\n    CPU time :\n",
            "preempted",
            "sigterm-shell-word",
            "train.log",
        ),
        # NKI-AI/direct#238 (case 5543): Thin: DIRECT MRI-reconstruction training on Linux with --num-gpus 2 or more ends with 'terminate called without an active exception' (title; the console is ...
        (
            "Terminate called without an active exception\n",
            "framework_error",
            "cxx-terminate",
            "train.log",
        ),
        # jade-hpc-gpu/jade-hpc-gpu.github.io#54 (case 5545): Thin: a JADE HPC user's training on node dgj324, GPU 7, stops abruptly 'with a message stating Bus Error'; the admins say they will look. A bus error only ...
        (
            "Hi, I was training a model on dgj324 - GPU 7 and it abrupt stopped with a message stating Bus Error.\n",
            "framework_error",
            "native-crash-in-words",
            "train.log",
        ),
        # JIA-Lab-research/PointGroup#30 (case 5547): Thin: PointGroup training fails with 'RuntimeError: cuda runtime error (9)' (title only; others hit the same, no fix). Legacy CUDA error 9 is invalid ...
        (
            "2021-01-04T10:12:33 gpu-node01 RuntimeError: cuda runtime error (9)\n",
            "framework_error",
            "cuda-launch-config",
            "train.log",
        ),
        # chenxin061/pdarts#16 (case 5549): P-DARTS search/training on a single 1080 Ti: 'RuntimeError: cuda runtime error (2)' (title; the body is a screenshot). Legacy CUDA runtime error 2 is out of ...
        (
            "2019-08-22T14:03:51 gpu-node01 RuntimeError: cuda runtime error (2)\n",
            "gpu_oom",
            "cuda-library-oom",
            "train.log",
        ),
        # hotshotco/Hotshot-XL#47 (case 5555): Hotshot-XL fine-tuning at 512 px on one A100 40GB: the reporter quotes 'cuda out of memory' (maintainer: hard at that resolution on 40 GB): gpu_oom
        (
            'I am using your code to make Finetune, but "cuda out of memory" is displayed.\n',
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # hotshotco/Hotshot-XL#45 (case 5557): Hotshot-XL fine-tuning on two 40GB A100s always fails with 'cuda out of memory' (quoted; the model was trained on 80 GB cards): gpu_oom
        (
            'I am using your code for finetune, but I will always have "cuda out of memory" error.\n',
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # THUDM/Chinese-Transformer-XL#17 (case 5563): Chinese-Transformer-XL fine-tuning on one node with two GPUs: 'DeepSpeed backend not set, please initialize it using init_process_group()' (the code ...
        (
            "DeepSpeed backend not set, please initialize it using init_process_group()\n",
            "framework_error",
            "process-group-not-initialized",
            "train.log",
        ),
        # CharlesShang/FastMaskRCNN#100 (case 5566): FastMaskRCNN TensorFlow training: 'Error, Segmentation fault (core dumped)' and nothing else (a commenter's fix: drop per_process_gpu_memory_fraction=0.95 ...
        (
            "2017-07-04T09:15:02 gpu-node01 Error,  Segmentation fault (core dumped)\n",
            "framework_error",
            "native-crash-in-words",
            "train.log",
        ),
        # nickyisadog/latent-diffusion-inpainting#6 (case 5567): Latent-diffusion inpainting fine-tuning: 'segmentation fault (core dumped)' just as epoch 1 starts (the author's fix: downgrade to CUDA 11.6; reordering ...
        (
            'I was confused by this error:"segmentation fault (core dumped) "when epoch 1 just start.\n',
            "framework_error",
            "native-crash-in-words",
            "train.log",
        ),
        # deeplearning4j/deeplearning4j#2530 (case 5574): Deeplearning4j Spark training (SparkDl4jMultiLayer with ParameterAveragingTrainingMaster) on the CUDA backend: 'CUDA error at ...
        (
            'SLF4J: Class path contains multiple SLF4J bindings.\nSLF4J: See http://www.slf4j.org/codes.html#multiple_bindings for an explanation.\nCUDA error at /skymind/libnd4j/blas/cuda/NativeOps.cu:5384 code=77(<unknown>) "result"\n',
            "cuda_error",
            "cuda-error-number",
            "train.log",
        ),
        # rapidsai/deployment#523 (case 5579): RAPIDS HPO example on SageMaker ml.p3.2xlarge: xgboost.dask.train fails with 'Memory allocation error on worker 0: std::bad_alloc: out_of_memory: CUDA error ...
        (
            'Traceback (most recent call last):\n  File "/opt/ml/code/train.py", line 75, in <module>\n    train()\n  File "/opt/ml/code/train.py", line 43, in train\n    trained_model = ml_workflow.fit(X_train, y_train)\n                    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/opt/ml/code/MLWorkflow.py", line 90, in timed_execution_wrapper\n    result = target_function(*args, **kwargs)\n             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/opt/ml/code/workflows/MLWorkflowMultiGPU.py", line 156, in fit\n    xgboost_output = xgboost.dask.train(\n                     ^^^^^^^^^^^^^^^^^^^\nxgboost.core.XGBoostError: [02:14:02] /home/conda/feedstock_root/build_artifacts/xgboost-split_1733189075592/work/src/c_api/../common/device_helpers.cuh:393: Memory allocation error on worker 0: std::bad_alloc: out_of_memory: CUDA error at: /opt/conda/include/rmm/mr/device/cuda_memory_resource.hpp\n',
            "gpu_oom",
            "cuda-oom",
            "train.log",
        ),
        # GoogleCloudPlatform/training-data-analyst#2457 (case 5580): Thin: a Vertex AI lab's CustomContainerTrainingJob.run 'errors out with CPU quota violation' (the report's title; the excerpt shows only the SDK traceback). ...
        (
            'The "Training and Deploying a TensorFlow Model in Vertex AI" lab\'s (lab_exercise_long.ipynb) CustomContainerTrainingJob errors out with CPU quota violation\nFile /opt/conda/lib/python3.9/site-packages/google/cloud/aiplatform/base.py:809, in optional_sync.<locals>.optional_run_in_thread.<locals>.wrapper(*args, **kwargs)\n    807     if self:\n    808         VertexAiResourceNounWithFutureManager.wait(self)\n--> 809     return method(*args, **kwargs)\n',
            "argument_error",
            "cloud-quota-exceeded",
            "notebook.log",
        ),
        # prefect-archive/prefect-gcp#175 (case 5581): prefect-gcp's VertexAICustomTrainingJob submits a GPU job without accelerator_count: Vertex AI answers INVALID_ARGUMENT 'Both `accelerator_type` and ...
        (
            'Submission failed. Traceback (most recent call last): File "/usr/local/lib/python3.10/site-packages/google/api_core/grpc_helpers.py", line 72, in error_remapped_callable return callable_(*args, **kwargs) File "/usr/local/lib/python3.10/site-packages/grpc/_channel.py", line 1030, in __call__ return _end_unary_response_blocking(state, call, False, None) File "/usr/local/lib/python3.10/site-packages/grpc/_channel.py", line 910, in _end_unary_response_blocking raise _InactiveRpcError(state) # pytype: disable=not-instantiable grpc._channel._InactiveRpcError: <_InactiveRpcError of RPC that terminated with: status = StatusCode.INVALID_ARGUMENT details = "List of found errors: 1.Field: job_spec.worker_pool_specs[0].machine_spec.accelerator_type; Message: Both `accelerator_type` and `accelerator_count` should be specified or none. "\n',
            "argument_error",
            "grpc-invalid-argument",
            "prefect.log",
        ),
        # LikeLy-Journey/SegmenTron#11 (case 5597): SegmenTron DeepLabv3+ on Cityscapes, 8x RTX 2080, dist_train.sh; training from scratch fits but resuming from checkpoint 211.pt runs the GPU out of memory. ...
        (
            "cuda out of memory if set args.resume to some model\nwhen training is stopped, and I set args.resume to the current checkpoint for continue training, cuda will be out of memory.\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # autonomousvision/projected-gan#47 (case 5599): Thin: projected-gan fastgan on one 8 GB GPU trains but cannot resume: the checkpoint pickle stays loaded, 'causing an OOM error'; a linked report quotes 'on ...
        (
            "python train.py --outdir=./training-runs/ --cfg=fastgan --data=pokemon256.zip --gpus=1 --batch=8 --mirror=1 --snap=10 --batch-gpu=8 --kimg=10000 --metrics=None\nI can train kimgs as long as I want with batch-gpu=4, on resume however I ALWAYS get a cuda out of memory? With batch-gpu=2 the resume works then.\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # Lightning-AI/pytorch-lightning#19674 (case 5604): Thin: a Lightning training run whose CUDA memory jumps when the checkpoint is saved at train_epoch_end and ends in a CUDA OOM; the error log section is cut ...
        (
            "CUDA memory increase (caused CUDA OOM) when saving checkpoint at the `train_epoch_end`\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # Lightning-AI/pytorch-lightning#18059 (case 5605): Lightning 2.0 DDP run with 16-bit AMP: trainer.fit with ckpt_path runs out of GPU memory in the optimizer step ('Resuming from checkpoint: (OOM error)'), ...
        (
            'When I try to resume the training from a checkpoint, program runs out of GPU memory.\nResuming from checkpoint: (OOM error)\nGlobal seed set to 42\nUsing 16bit Automatic Mixed Precision (AMP)\nGPU available: True (cuda), used: True\nTPU available: False, using: 0 TPU cores\nIPU available: False, using: 0 IPUs\n  File "/...path.../.conda/envs/environment/lib/python3.10/site-packages/pytorch_lightning/loops/training_epoch_loop.py", line 218, in advance\n    batch_output = self.automatic_optimization.run(trainer.optimizers[0], kwargs)\n  File "/...path.../.conda/envs/environment/lib/python3.10/site-packages/pytorch_lightning/loops/optimization/automatic.py", line 185, in run\n    self._optimizer_step(kwargs.get("batch_idx", 0), closure)\n  File "/...path.../.conda/envs/environment/lib/python3.10/site-packages/pytorch_lightning/loops/optimization/automatic.py", line 261, in _optimizer_step\n    call._call_lightning_module_hook(\n  File "/...path.../.conda/envs/environment/lib/python3.10/site-packages/pytorch_lightning/trainer/call.py", line 142, in _call_lightning_module_hook\n    output = fn(*args, **kwargs)\n  File "/...path.../.conda/envs/environment/lib/python3.10/site-packages/pytorch_lightning/core/module.py", line 1265, in optimizer_step\n    optimizer.step(closure=optimizer_closure)\n  File "/...path.../.conda/envs/environment/lib/python3.10/site-packages/pytorch_lightning/core/optimizer.py", line 158, in step\n    step_output = self._strategy.optimizer_step(self._optimizer, closure, **kwargs)\n',
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # InternLM/xtuner#1034 (case 5607): xtuner LoRA fine-tune of InternVL3-9B under DeepSpeed ZeRO-1 resumed from iter_300.pth (load_from + resume=True): rank 0 fails inside mmengine's ...
        (
            '05/11 14:58:00 - mmengine - INFO - Auto resumed from the latest checkpoint /root/train/lora_output/iter_300.pth.\n05/11 14:58:00 - mmengine - INFO - Resume checkpoint from /root/train/lora_output/iter_300.pth\n[rank0]: Traceback (most recent call last):\n[rank0]:   File "/root/.conda/envs/xtuner/lib/python3.10/site-packages/xtuner/tools/train.py", line 360, in <module>\n[rank0]:     main()\n[rank0]:   File "/root/.conda/envs/xtuner/lib/python3.10/site-packages/xtuner/tools/train.py", line 356, in main\n[rank0]:     runner.train()\n[rank0]:   File "/root/.conda/envs/xtuner/lib/python3.10/site-packages/mmengine/runner/_flexible_runner.py", line 1195, in train\n[rank0]:     self.load_or_resume()\n[rank0]:   File "/root/.conda/envs/xtuner/lib/python3.10/site-packages/mmengine/runner/_flexible_runner.py", line 1141, in load_or_resume\n[rank0]:     self.resume(resume_from)\n',
            "checkpoint_load_error",
            "cut-in-checkpoint-loading",
            "train.log",
        ),
        # bytedance/Sa2VA#138 (case 5608): Sa2VA training (xtuner, DeepSpeed) resumed from a *.pth file when no DeepSpeed-format checkpoint was saved: rank 2 fails in mmengine's ...
        (
            '[rank2]: Traceback (most recent call last):\n[rank2]:   File "/data3/shilu/Sa2VA/tools/train.py", line 65, in <module>\n[rank2]:     train.main()\n[rank2]:   File "/data3/shilu/Sa2VA/.venv/lib/python3.11/site-packages/xtuner/tools/train.py", line 356, in main\n[rank2]:     runner.train()\n[rank2]:   File "/data3/shilu/Sa2VA/.venv/lib/python3.11/site-packages/mmengine/runner/_flexible_runner.py", line 1195, in train\n[rank2]:     self.load_or_resume()\n[rank2]:   File "/data3/shilu/Sa2VA/.venv/lib/python3.11/site-packages/mmengine/runner/_flexible_runner.py", line 1141, in load_or_resume\n[rank2]:     self.resume(resume_from)\n[rank2]:   File "/data3/shilu/Sa2VA/.venv/lib/python3.11/site-packages/mmengine/runner/_flexible_runner.py", line 1456, in resume\n[rank2]:     checkpoint = self.strategy.resume(\n[rank2]:                  ^^^^^^^^^^^^^^^^^^^^^\n[rank2]:   File "/data3/shilu/Sa2VA/.venv/lib/python3.11/site-packages/xtuner/engine/_strategy/deepspeed.py", line 60, in resume\n[rank2]:     checkpoint = super().resume(*args, **kwargs)\n[rank2]:                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n[rank2]:   File "/data3/shilu/Sa2VA/.venv/lib/python3.11/site-packages/mmengine/_strategy/deepspeed.py", line 472, in resume\n',
            "checkpoint_load_error",
            "cut-in-checkpoint-loading",
            "rank2.log",
        ),
        # Haochen-Wang409/ross#13 (case 5609): ROSS/LumosVL second-stage SFT (HF Trainer + DeepSpeed, 4 nodes) resumed from checkpoint-5439: transformers' deepspeed_load_checkpoint raises 'ValueError: ...
        (
            '  File "/input/lufan/code/LumosVL/train.py", line 1275, in train\n    train()\n  File "/input/lufan/code/LumosVL/train.py", line 1275, in train\n    trainer.train(resume_from_checkpoint=True)\n  File "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py", line 1938, in train\n    return inner_training_loop(\n  File "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py", line 2119, in _inner_training_loop\n    deepspeed_load_checkpoint(\n  File "/opt/conda/lib/python3.10/site-packages/transformers/integrations/deepspeed.py", line 440, in deepspeed_load_checkpoint\n    raise ValueError(f"[deepspeed] failed to resume from checkpoint {checkpoint_path}")\nValueError: [deepspeed] failed to resume from checkpoint /input1/lufan/lumos_vl_checkpoints/RDM/rdm-siglip-qwen-7b-sft737k-4nodes-NoNorm-0.2w0.2w/checkpoint-5439\n',
            "checkpoint_load_error",
            "resume-failed",
            "train.log",
        ),
        # huggingface/diffusers#4956 (case 5634): Thin: fine-tuning Stable Diffusion on an RTX 3090 runs out of GPU memory after upgrading diffusers 0.16 -> 0.17 with no other change ('CUDA OUT OF MEMORY'); ...
        (
            "Upgrade to Diffusers 0.17 and get CUDA OUT OF MEMORY\nWithout any change when fine-tuning the sd pretrained model, but when I upgrade diffusers from 0.16 to 0.17, I got a CUDA OUT OF MEMORY. My device is a rtx3090.\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # roboflow/rf-detr#940 (case 5637): Thin: RF-DETR Seg 2XLarge fine-tuning on 4 L40S (driver 580.95.05, CUDA 13.0, torch 2.9.1+cu128, rfdetr latest) crashed with CUDA out of memory after 24800 ...
        (
            "CUDA Out Of Memory later during the training\nSo I ran a training and it crashed after 24800 iterations because of OOM issue.\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # bmaltais/kohya_ss#1098 (case 5640): kohya_ss LoRA training that suddenly went from low loss to 0.1+ after 100 steps (described only); trying release 21.7.7, Torch 2 fails with 'Could not load ...
        (
            "Pytorch: Torch 2.0.1+cu118 17:22:50-122539 ERROR Could not load torch: cuDNN version incompatibility: PyTorch was compiled against (8, 7, 0) but found runtime version (8,\n",
            "import_error",
            "cudnn-version-incompatible",
            "train.log",
        ),
        # deepspeedai/DeepSpeed#1218 (case 5642): Thin: DeepSpeed ZeRO training fails with "AttributeError: 'FP16_DeepSpeedZeroOptimizer' object has no attribute 'ipg_index'" (title; later commenters hit it ...
        (
            "AttributeError: 'FP16_DeepSpeedZeroOptimizer' object has no attribute 'ipg_index'\n",
            "framework_error",
            "deepspeed-object-attribute",
            "train.log",
        ),
        # NVIDIA/waveglow#78 (case 1685): WaveGlow on a V100 with batch 3, a line that says only 'out of the memory'
        (
            "Epoch: 0\nout of the memory\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # deepspeedai/DeepSpeed#5374 (case 5504): DeepSpeed's CPU Adam built at run time on every node of a multi-node run; the traceback ends in the op builder's jit_load, its error cut
        (
            '676d-5 optimizer = DeepSpeedCPUAdam(model_parameters,\n675d-5:   File "/home/ashmal.vayani/anaconda3/envs/finetune_mobillama/lib/python3.10/site-packages/deepspeed/ops/adam/cpu_adam.py", line 94, in __init__\n675d-5:     self.ds_opt_adam = CPUAdamBuilder().load()\n675d-5:   File "/home/ashmal.vayani/anaconda3/envs/finetune_mobillama/lib/python3.10/site-packages/deepspeed/ops/op_builder/builder.py", line 479, in load\n675d-5:     return self.jit_load(verbose)\n675d-5:   File "/home/ashmal.vayani/anaconda3/envs/finetune_mobillama/lib/python3.10/site-packages/deepspeed/ops/op_builder/builder.py", line 499, in jit_load\n675d-5:     extra_include_paths = [os.path.abspath(self.deepspeed_src_path(path)) for path in self.include_paths()]\n',
            "import_error",
            "deepspeed-op-jit-load",
            "train.log",
        ),
        # hiyouga/LlamaFactory#4557 (case 5003): Llama-3-8B fine-tuned under ZeRO-3; torch's embedding check with ZeRO3 named on the title's line
        (
            "Get \"RuntimeError: 'weight' must be 2-D\" Error when finetuning llama3-8b using ZeRO3 and customised dataset\n",
            "framework_error",
            "embedding-weight-partitioned",
            "train.log",
        ),
    ],
)
def test_round150_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


_ILLEGAL_ACCESS = "RuntimeError: CUDA error: an illegal memory access was encountered"
_GPU_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."


@pytest.mark.parametrize(
    ("weak", "later", "answer"),
    [
        ("I got a CUDA OUT OF MEMORY", _ILLEGAL_ACCESS, "cuda_error"),
        ("out of the memory", _ILLEGAL_ACCESS, "cuda_error"),
        ("the training crashes giving a Segmentation fault (core dumped) and nothing else", _GPU_OOM, "gpu_oom"),
        ("Terminated", _GPU_OOM, "gpu_oom"),
        (
            "[BUG] Always get errno: 110 - Connection timed out when using deepspeed multi-node training.",
            _GPU_OOM,
            "gpu_oom",
        ),
    ],
)
def test_words_and_bare_lines_give_way_to_the_error_the_run_printed(weak: str, later: str, answer: str) -> None:
    """Weak readings: an error the run printed after them is the answer."""
    assert reason_and_rule(f"{weak}\n{later}\n")[0] == answer


def test_a_traceback_cut_outside_checkpoint_loading_says_nothing_of_a_checkpoint() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 10, in <module>\n'
        "    main()\n"
        '  File "/w/train.py", line 7, in main\n'
        "    step(batch)\n"
    )
    assert reason_and_rule(text)[0] != "checkpoint_load_error"


def test_the_embedding_check_without_the_sharding_named_is_left_to_its_traceback() -> None:
    """Case 4322 labels the same message script_error (the script ran its unsharded module): not this rule's."""
    assert reason_and_rule("RuntimeError: 'weight' must be 2-D\n")[1] != "embedding-weight-partitioned"


def test_a_cuda_samples_check_of_status_2_is_not_read_as_a_device_fault() -> None:
    line = 'CUDA error at /src/kernels.cu:88 code=2(cudaErrorMemoryAllocation) "cudaMalloc(&p, n)"\n'
    assert reason_and_rule(line)[1] != "cuda-error-number"


def test_a_traceback_cut_inside_deepspeeds_op_builder_is_the_ops_build() -> None:
    """deepspeedai/DeepSpeed#5374 (case 5504) without pdsh's host prefix: the engine follows the traceback to its cut
    end inside the op builder's jit_load (the rule reads the prefixed frame, the engine this one)."""
    text = "".join(
        line.split(": ", 1)[1] + "\n"
        for line in (Path(__file__).parents[2] / "data/failures")
        .glob("5504-*/train.log")
        .__next__()
        .read_text()
        .splitlines()
        if line.startswith("675d-5: ")
    )
    assert "jit_load" in text
    assert reason_and_rule(text) == ("import_error", "cut-in-op-build")
