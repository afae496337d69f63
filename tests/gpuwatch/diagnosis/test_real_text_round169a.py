"""Classes of misses from issue 19's rounds one hundred and sixty-nine to one hundred and seventy-two (corpus cases
6000-6108: reports found by generic queries that show at least one line the failing run printed: custom CUDA
extensions and fused kernels, DDP and torch.distributed, saving checkpoints, ROCm, MPS, XPU and TPU; taken as the
search returned them), and older cases the same classes cover (2034, 4670, 4682, 4941). Error messages are verbatim
from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # 67372a/LoRA_Easy_Training_Scripts#45 (case 6002): LoRA training with xformers on an RTX 5090 (Blackwell) fails as training starts with a CUDA 'invalid argument' raised from xformers' bundled FlashAttention hopper (sm90) launch tem ...
        (
            "# CUDA error with Xformers\nCUDA error (C:/a/xformers/xformers/third_party/flash-attention/hopper\\flash_fwd_launch_template.h:188): invalid argument\n",
            "import_error",
            "hopper-kernel-elsewhere",
            "train.log",
        ),
        # deepspeedai/DeepSpeed#2610 (case 6007): A DeepSpeed config names the optimizer 'FusedAdam' and DeepSpeed refuses it ('FusedAdam is not a supported DeepSpeed Optimizer'); ds_report shows fused_adam compatible, so the op i ...
        (
            "# Cannot use FusedAdam as optimizer\nAssertionError: FusedAdam is not a supported DeepSpeed Optimizer\n",
            "argument_error",
            "deepspeed-optimizer-unsupported",
            "train.log",
        ),
        # loicland/superpoint_graph#81 (case 6017): Superpoint graph training on S3DIS (GTX 1080 Ti, CUDA 9, pytorch 0.3.1) hits a random illegal memory access in loss.backward ~70% of runs (title; the excerpt keeps the traceback's  ...
        (
            '# Random Runtime Illegal Memory Access Error at training S3DIS Dataset\n  File "learning/main.py", line 387, in <module>\n    main()\n  File "learning/main.py", line 286, in main\n    acc, loss, oacc, avg_iou = train()\n  File "learning/main.py", line 187, in train\n    loss.backward()\n  File "/home/.../anaconda3/envs/spg/lib/python3.6/site-packages/torch/autograd/variable.py", line 167, in backward\n',
            "cuda_error",
            "cuda-error-in-words",
            "train.log",
        ),
        # hpcaitech/ColossalAI-Examples#180 (case 6032): ColossalAI's multi-node launcher cannot start torchrun on the second host ('failed to run torchrun ... on <host2>'); the maintainer's first question is whether the machines reach e ...
        (
            "# The error happened when I did multi-node distributed training\n$ colossalai run --nproc_per_node 4 --host 10.0.0.11,10.0.0.12 --master_addr 10.0.0.11 train.py\nError: failed to run torchrun --nproc_per_node=4 --nnodes=2 --node_rank=1 --rdzv_backend=c10d --rdzv_endpoint=10.0.0.11:29500 --rdzv_id=colossalai-default-job train.py on 10.0.0.12\n",
            "network_error",
            "launcher-remote-start-failed",
            "train.log",
        ),
        # speechbrain/speechbrain#1250 (case 6034): SpeechBrain ASR recipe under DDP on an 8-GPU server fails in validation at the recipe's own compute_objectives (batch.wrd); the exception line is cut from the paste, and the user f ...
        (
            'Traceback (most recent call last):\n  File "train_conf.py", line 413, in <module>\n    asr_brain.fit(\n  File "/home/dabuk/software/speechbrain/speechbrain/core.py", line 1075, in fit\n    loss = self.evaluate_batch(batch, stage=Stage.VALID)\n  File "train_conf.py", line 200, in evaluate_batch\n    loss = self.compute_objectives(predictions, batch, stage=stage)\n  File "train_conf.py", line 180, in compute_objectives\n    target_words = [wrd.split(" ") for wrd in batch.wrd]\n',
            "script_error",
            "cut-in-script",
            "train.log",
        ),
        # NELSONZHAO/zhihu#13 (case 6061): A TensorFlow notebook's saver.save at the end of training refuses a bare checkpoint name: 'Parent directory of trained_model.ckpt doesn't exist, can't save.' (pasted as 'Value Erro ...
        (
            "# saver.save(sess, checkpoint) running Error\nValue Error：Parent directory of trained_model.ckpt doesn't exist, can't save.\n",
            "file_not_found",
            "save-parent-directory-missing",
            "train.log",
        ),
        # apple/turicreate#139 (case 6065): Turi Create's object detector on an EC2 GPU instance writes its SFrame scratch data during training until the 80GB of free disk is gone; the excerpt keeps the traceback's frames an ...
        (
            "# Disk usage expands dramatically during training, causes 'Disk may be full' error.\n$ python train.py\nUsing 'image' as feature column\nUsing 'annotations' as annotations column\nTraceback (most recent call last):\n  File \"train.py\", line 17, in <module>\n    model = tc.object_detector.create(data, max_iterations=ITERS)\n  File \"/home/ubuntu/.virtualenvs/turicreate/local/lib/python2.7/site-packages/turicreate/toolkits/object_detector/object_detector.py\", line 240, in create\n    instances = (dataset.stack(annotations, new_column_name='_bbox', drop_na=True)\n  File \"/home/ubuntu/.virtualenvs/turicreate/local/lib/python2.7/site-packages/turicreate/data_structures/sframe.py\", line 5117, in stack\n",
            "storage_error",
            "short-write",
            "train.log",
        ),
        # coreylynch/grid-lstm#5 (case 6067): A Torch7 grid-LSTM language model fails at random checkpoints: THDiskFile's 'write error: wrote 39776036 blocks instead of 41251350' while saving the .t7 file, leaving it unusable  ...
        (
            "saving checkpoint to cv/lm_lstm_epoch0.10_1.2833.t7\t\n/home/____/torch/install/bin/luajit: /home/____/torch/install/share/lua/5.1/torch/File.lua:210: write error: wrote 39776036 blocks instead of 41251350 at /tmp/luarocks_torch-scm-1-1419/torch7/lib/TH/THDiskFile.c:340\nstack traceback:\n\t[C]: in function 'write'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:210: in function </home/____/torch/install/share/lua/5.1/torch/File.lua:107>\n\t[C]: in function 'write'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:210: in function 'writeObject'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:235: in function 'writeObject'\n\t/home/____/torch/install/share/lua/5.1/nn/Module.lua:154: in function 'write'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:210: in function 'writeObject'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:235: in function 'writeObject'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:235: in function 'writeObject'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:220: in function 'writeObject'\n\t/home/____/torch/install/share/lua/5.1/torch/File.lua:228: in function 'writeObject'\n\t...\n",
            "storage_error",
            "short-write",
            "train.log",
        ),
        # OpenNMT/OpenNMT#488 (case 6068): OpenNMT (Lua) trains two epochs and dies on 'Saving checkpoint to model_epoch2_1802.82.t7': THDiskFile's 'write error: wrote 17092637 blocks instead of 41613820'; the checkpoint wr ...
        (
            "[01/09/18 19:44:12 INFO] Epoch 2 ; Iteration 50/184 ; Optim SGD LR 1.000000 ; Source tokens/s 5973 ; Perplexity 2708.27\t\n[01/09/18 19:44:22 INFO] Epoch 2 ; Iteration 100/184 ; Optim SGD LR 1.000000 ; Source tokens/s 6646 ; Perplexity 2093.36\t\n[01/09/18 19:44:32 INFO] Epoch 2 ; Iteration 150/184 ; Optim SGD LR 1.000000 ; Source tokens/s 6580 ; Perplexity 1701.63\t\n[01/09/18 19:44:38 INFO] Epoch 2 ; Iteration 184/184 ; Optim SGD LR 1.000000 ; Source tokens/s 6556 ; Perplexity 1580.66\t\n[01/09/18 19:44:38 INFO] Evaluating on the validation dataset...\t\n[01/09/18 19:44:42 INFO] Validation perplexity: 1802.82\t\n[01/09/18 19:44:42 INFO] Saving checkpoint to 'model_epoch2_1802.82.t7'...\t\n/home/jinyuliu/torch/install/bin/luajit: /home/jinyuliu/torch/install/share/lua/5.1/torch/File.lua:210: write error: wrote 17092637 blocks instead of 41613820 at /home/jinyuliu/torch/pkg/torch/lib/TH/THDiskFile.c:356\nstack traceback:\n\t[C]: in function 'write'\n\t/home/jinyuliu/torch/install/share/lua/5.1/torch/File.lua:210: in function </home/jinyuliu/torch/install/share/lua/5.1/torch/File.lua:107>\n\t[C]: in function 'write'\n\t/home/jinyuliu/torch/install/share/lua/5.1/torch/File.lua:210: in function 'writeObject'\n\t/home/jinyuliu/torch/install/share/lua/5.1/torch/File.lua:235: in function 'writeObject'\n",
            "storage_error",
            "short-write",
            "train.log",
        ),
        # apache/mxnet#6050 (case 6069): An MXNet ResNet-152 training run saves a .params checkpoint each epoch; at epoch 39's save dmlc's local_filesys.cc check fails: 'std::fwrite(ptr, 1, size, fp_) == size FileStream.W ...
        (
            'INFO:root:Epoch[38] Batch [20]  Speed: 18.34 samples/sec        Train-accuracy=0.544643\nINFO:root:Epoch[38] Batch [40]  Speed: 18.33 samples/sec        Train-accuracy=0.534375\nINFO:root:Epoch[38] Batch [60]  Speed: 18.32 samples/sec        Train-accuracy=0.512500\nINFO:root:Epoch[38] Batch [80]  Speed: 18.31 samples/sec        Train-accuracy=0.481250\nINFO:root:Epoch[38] Train-accuracy=0.526786\nINFO:root:Epoch[38] Time cost=76.241\nINFO:root:Saved checkpoint to "./models/resnet-152/resnet-152-train-224-0039.params"\nINFO:root:Epoch[38] Validation-accuracy=0.462500\nINFO:root:Epoch[39] Batch [20]  Speed: 18.32 samples/sec        Train-accuracy=0.559524\nINFO:root:Epoch[39] Batch [40]  Speed: 18.35 samples/sec        Train-accuracy=0.562500\nINFO:root:Epoch[39] Batch [60]  Speed: 18.33 samples/sec        Train-accuracy=0.493750\nINFO:root:Epoch[39] Batch [80]  Speed: 18.32 samples/sec        Train-accuracy=0.503125\nINFO:root:Epoch[39] Train-accuracy=0.479167\nINFO:root:Epoch[39] Time cost=75.345\n[16:24:41] include/dmlc/logging.h:303: [16:24:41] src/io/local_filesys.cc:39: Check failed: std::fwrite(ptr, 1, size, fp_) == size FileStream.Write incomplete\n\nStack trace returned 10 entries:\n',
            "storage_error",
            "short-write",
            "train.log",
        ),
        # iperov/DeepFaceLab#5418 (case 6072): DeepFaceLab on an RTX 3090 with 32GB RAM and a 32GB page file crashes with 'MemoryError' as soon as the model saves (the pasted console is cut after the model summary; the title an ...
        (
            '# "MemoryError" on saving model - not OOM?\nRunning trainer.\n\nChoose one of saved models, or enter a name to create a new model.\n[r] : rename\n[d] : delete\n\n[0] : DF-UD384 - latest\n :\n0\nLoading DF-UD384_SAEHD model...\n\nChoose one or several GPU idxs (separated by comma).\n\n[CPU] : CPU\n  [0] : NVIDIA GeForce RTX 3090\n\n[0] Which GPU indexes to choose? :\n0\n\nInitializing models: 100%|###############################################################| 5/5 [00:04<00:00,  1.03it/s]\nLoading samples: 100%|############################################################| 2034/2034 [00:06<00:00, 324.27it/s]\nLoading samples: 100%|##############################################################| 898/898 [00:02<00:00, 404.25it/s]\n================== Model Summary ===\n',
            "host_oom",
            "memoryerror-in-words",
            "train.log",
        ),
        # deepspeedai/DeepSpeed#7650 (case 6075): A DeepSpeed ZeRO stage 1/2 run (with a compression feature) trains ten steps and save_checkpoint fails inside stage_1_and_2.py's optimizer state_dict; the excerpt ends at _get_base ...
        (
            '# [BUG] IndexError occurs when saving checkpoint under ZeRO Stage 1/2\nStep 0 | Loss = 2.2303\nStep 1 | Loss = 2.2425\nStep 2 | Loss = 2.3195\nStep 3 | Loss = 2.2785\nStep 4 | Loss = 2.3427\nStep 5 | Loss = 2.3232\nStep 6 | Loss = 2.3719\nStep 7 | Loss = 2.3106\nStep 8 | Loss = 2.2907\nStep 9 | Loss = 2.2786\nStep 10 | Loss = 2.2415\n\nSaving checkpoint at step 10 -> tag=step_10\n\n[rank0]: Traceback (most recent call last):\n[rank0]:   File "/home/yanzhen/distributed_test/deepspeed-test/bug2.py", line 114, in <module>\n[rank0]:     main()\n[rank0]:   File "/home/yanzhen/distributed_test/deepspeed-test/bug2.py", line 105, in main\n[rank0]:     model_engine.save_checkpoint(ckpt_dir, tag=tag)\n[rank0]:   File "/home/yanzhen/miniconda3/envs/deepspeed/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 3505, in save_checkpoint\n[rank0]:     self._save_zero_checkpoint(save_dir, tag)\n[rank0]:   File "/home/yanzhen/miniconda3/envs/deepspeed/lib/python3.10/site-packages/deepspeed/runtime/engine.py", line 3888, in _save_zero_checkpoint\n[rank0]:     zero_sd = dict(optimizer_state_dict=self.optimizer.state_dict(), ds_config=self.config, ds_version=version)\n[rank0]:   File "/home/yanzhen/miniconda3/envs/deepspeed/lib/python3.10/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 2335, in state_dict\n[rank0]:     state_dict[BASE_OPTIMIZER_STATE] = self._get_base_optimizer_state()\n',
            "framework_error",
            "cut-in-framework",
            "train.log",
        ),
        # haotian-liu/LLaVA#1583 (case 6076): LLaVA LoRA fine-tuning under DeepSpeed ZeRO-3 on SageMaker completes and fails while saving checkpoints; the stored excerpt keeps the launcher's sigkill_handler line for rank 3 and ...
        (
            "# Deepspeed Assertion Error after training is completed while saving check points\n[2024-06-30 21:00:32,953] [ERROR] [launch.py:321:sigkill_handler] ['/home/ec2-user/SageMaker/de_expansion/llava_dry_run/amazon-sagemaker-finetune-/llava_env/bin/python3', '-u', 'llava/train/train_mem.py', '--local_rank=3', '--lora_enable', 'True', '--lora_r', '128', '--lora_alpha', '256', '--mm_projector_lr', '2e-5', '--deepspeed', './scripts/zero3.json', '--model_name_or_path', 'liuhaotian/llava-v1.5-7b', '--version', 'v1', '--data_path', './data/train_size_chart_ocr_40.json', '--image_folder', './data', '--vision_tower', 'openai/clip-vit-large-patch14-336', '--mm_projector_type', 'mlp2x_gelu', '--mm_vision_select_layer', '-2', '--mm_use_im_start_end', 'False', '--mm_use_im_patch_token', 'False', '--image_aspect_ratio', 'pad', '--group_by_modality_length', 'True', '--bf16', 'True', '--output_dir', 'llava-lora-outputs', '--num_train_epochs', '5', '--per_device_train_batch_size', '4', '--per_device_eval_batch_size', '4', '--gradient_accumulation_steps', '8', '--evaluation_strategy', 'no\n', '--save_strategy', 'steps', '--save_steps', '50000', '--save_total_limit', '1', '--learning_rate', '2e-4', '--weight_decay', '0.', '--warmup_ratio', '0.03', '--lr_scheduler_type', 'cosine', '--logging_steps', '1', '--tf32', 'True', '--model_max_length', '2048', '--gradient_checkpointing', 'True', '--dataloader_num_workers',\n",
            "framework_error",
            "deepspeed-assertion-in-words",
            "train.log",
        ),
        # tensorflow/tensorflow#13120 (case 6078): A TensorFlow notebook on Windows fails when saving the model; the stored excerpt keeps session.run's frames and the title names TensorFlow's PermissionDeniedError from the save: th ...
        (
            "# PermissionDeniedError when save model\nd:\\anaconda3664\\lib\\site-packages\\tensorflow\\python\\client\\session.py in run(self, fetches, feed_dict, options, run_metadata)\n    893     try:\n    894       result = self._run(None, fetches, feed_dict, options_ptr,\n--> 895                          run_metadata_ptr)\n    896       if run_metadata:\n    897         proto_data = tf_session.TF_GetBuffer(run_metadata_ptr)\n\nd:\\anaconda3664\\lib\\site-packages\\tensorflow\\python\\client\\session.py in _run(self, handle, fetches, feed_dict, options, run_metadata)\n   1122     if final_fetches or final_targets or (handle and feed_dict_tensor):\n   1123       results = self._do_run(handle, final_targets, final_fetches,\n-> 1124                              feed_dict_tensor, options, run_metadata)\n   1125     else:\n   1126       results = []\n\nd:\\anaconda3664\\lib\\site-packages\\tensorflow\\python\\client\\session.py in _do_run(self, handle, target_list, fetch_list, feed_dict, options, run_metadata)\n   1319     if handle is None:\n   1320       return self._do_call(_run_fn, self._session, feeds, fetches, targets,\n-> 1321                            options, run_metadata)\n   1322     else:\n   1323       return self._do_call(_prun_fn, self._session, handle, feeds, fetches)\n",
            "permission_error",
            "tf-permission-denied",
            "train.log",
        ),
        # karpathy/llama2.c#461 (case 6092): llama2.c train.py on Apple MPS with dtype bfloat16: the start-up lines are pasted and the user says the model trains for a while and then gets -Infs or NaNs (the same config trains ...
        (
            "# Training Tiny Stories: 'CUDA' -vs- 'MPS'\n% python train.py --vocab_source=custom --vocab_size=32000\nOverriding: vocab_source = custom\nOverriding: vocab_size = 32000\ntokens per iteration will be: 6,144\nThe model with train for awhile and then get either -Infs or NaNs.\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # mittagessen/kraken#358 (case 6093): kraken's ketos train -d mps aborts with NotImplementedError: aten::_ctc_loss is not implemented for the MPS device (works with -d cpu, and with PYTORCH_ENABLE_MPS_FALLBACK=1); a de ...
        (
            "% ketos train -f page -t list.eval -d mps\nGPU available: True (mps), used: True\nTPU available: False, using: 0 TPU cores\nIPU available: False, using: 0 IPUs\nHPU available: False, using: 0 HPUs\nNotImplementedError: The operator 'aten::_ctc_loss' is not currently implemented for the MPS device. If you want this op to be added in priority during the prototype \nphase of this feature, please comment on https://github.com/pytorch/pytorch/issues/77764. As a temporary fix, you can set the environment variable \n`PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback for this op. WARNING: this will be slower than running natively on MPS.\n",
            "framework_error",
            "mps-backend-failure",
            "train.log",
        ),
        # pytorch/pytorch#166746 (case 6094): Keras on the torch backend training on MPS: binary_crossentropy's mps.multiply on (B,T,1) x (B,T) makes MPSGraph fail its own assertion; the crash report shows the metal gpu stream ...
        (
            "# Keras with torch MPS: binary_crossentropy crashes with mps.multiply broadcast ((B,T,1) × (B,T))\nThread 4 Crashed::  Dispatch queue: metal gpu stream\n0   libsystem_kernel.dylib        \t       0x197c36388 __pthread_kill + 8\n1   libsystem_pthread.dylib       \t       0x197c6f848 pthread_kill + 296\n2   libsystem_c.dylib             \t       0x197b789e4 abort + 124\n3   libsystem_c.dylib             \t       0x197b77c18 __assert_rtn + 284\n4   Metal                         \t       0x1a3213cb0 MTLReportFailure.cold.1 + 48\n5   Metal                         \t       0x1a31e8d70 MTLReportFailure + 576\n6   MetalPerformanceShadersGraph  \t       0x1fc905348 -[MPSGraphExecutable commonPostInit:] + 912\n7   MetalPerformanceShadersGraph  \t       0x1fc906318 -[MPSGraphExecutable initWithGraph:device:feeds:targetTensors:targetOperations:executableDescriptor:] + 1900\n8   MetalPerformanceShadersGraph  \t       0x1fc7bf034 -[MPSGraph compileWithDevice:feeds:targetTensors:targetOperations:compilationDescriptor:] + 408\n9   MetalPerformanceShadersGraph  \t       0x1fc7c04ac -[MPSGraph getExecutableForDevice:feeds:targetTensors:targetOperations:resultsDictionary:executionDescriptor:] + 1864\n",
            "framework_error",
            "mps-backend-failure",
            "crash.log",
        ),
        # Motphys/UniLab#572 (case 6095): PPO training with rsl_rl on an Intel XPU under WSL2 (torch 2.7.0+xpu) fails in the first iteration with RuntimeError: UR error from Intel's Unified Runtime on a division and a .cop ...
        (
            '# Bug: Intel XPU training fails with "UR error" in rsl_rl\nuv run --no-sync train --algo ppo --task go2_joystick_flat --sim mujoco training.device=xpu training.no_play=true\nRuntimeError: UR error\n',
            "cuda_error",
            "accelerator-runtime-fault",
            "train.log",
        ),
        # ultralytics/ultralytics#20964 (case 6096): YOLO training in a notebook on a Lunar Lake iGPU (Arc 140V) with a patched Ultralytics for XPU: the forward pass in _do_train raises RuntimeError: UR error (the traceback's tail is ...
        (
            "I'm running into a `RuntimeError: UR error`, which I suspect is related to tensor conversion to the GPU.\nRuntimeError                              Traceback (most recent call last)\nCell In[7], line 1\n----> 1 model.train(\n      2     data=dataset_path,\n      3     epochs=10,\n      4     batch=16,\n      5     imgsz=640,\n      6     workers=4,\n      7     amp=True,\n      8     cache=True,\n      9     patience=50,\n     10     save_period=10,\n     11     save=True,\n     12     verbose=True,\n     13     device=DEVICE\n     14 )\n\nFile /path/to/ultralytics/engine/model.py:797, in Model.train(self, trainer, **kwargs)\n    797 self.trainer.train()\n\nFile /path/to/ultralytics/engine/trainer.py:227, in BaseTrainer.train(self)\n    227 self._do_train(world_size)\n\nFile /path/to/ultralytics/engine/trainer.py:409, in BaseTrainer._do_train(self, world_size)\n    409 loss, self.loss_items = self.model(batch)\n",
            "cuda_error",
            "accelerator-runtime-fault",
            "train.log",
        ),
        # pytorch/xla#2875 (case 6097): transformers' run_mlm.py on a TPU with torch_xla (XRT): XRTExecute fails on device TPU:6 with 'Failed precondition: Driver must be Open to DMA map' while the Trainer logs and saves ...
        (
            '2021-04-16 20:58:20.811049: E   27032 tensorflow/compiler/xla/xla_client/xla_util.cc:88] 0 derived errors ignored.\nException in device=TPU:6: Failed precondition: From /job:tpu_worker/replica:0/task:0:\n2 root error(s) found.\n  (0) Failed precondition: Driver must be Open to DMA map.\n     [[{{node XRTExecute}}]]\n     [[XRTExecute_G15]]\n  (1) Failed precondition: Driver must be Open to DMA map.\n     [[{{node XRTExecute}}]]\n0 successful operations.\n0 derived errors ignored.\nTraceback (most recent call last):\n  File "/anaconda3/envs/torch-xla-nightly/lib/python3.6/site-packages/torch_xla/distributed/xla_multiprocessing.py", line 329, in _mp_start_fn\n    _start_fn(index, pf_cfg, fn, args)\n  File "/anaconda3/envs/torch-xla-nightly/lib/python3.6/site-packages/torch_xla/distributed/xla_multiprocessing.py", line 323, in _start_fn\n    fn(gindex, *args)\n  File "/mnt/disks/second_sdb/hugging-face-transformers/examples/language-modeling/run_mlm.py", line 520, in _mp_fn\n    main()\n  File "/mnt/disks/second_sdb/hugging-face-transformers/examples/language-modeling/run_mlm.py", line 483, in main\n    train_result = trainer.train(model_path=model_path)\n  File "/anaconda3/envs/torch-xla-nightly/lib/python3.6/site-packages/transformers/trainer.py", line 929, in train\n    self._maybe_log_save_evaluate(tr_loss, model, trial, epoch)\n',
            "cuda_error",
            "accelerator-runtime-fault",
            "train.log",
        ),
        # ROCm/legacy-rocm-build#3696 (case 6098): Inference on an MI210 (ROCm 6.1) crashes in the HIP runtime when the prompt is long; dmesg shows amdgpu sq_intr errors (err_type 2) for the faulting waves, and the reporter later w ...
        (
            "[Tue Sep 10 09:37:12 2024] amdgpu: sq_intr: error, se 1, data 0x0, sh 0, priv 1, wave_id 1, simd_id 1, cu_id 11, err_type 2\n[Tue Sep 10 09:37:12 2024] amdgpu: sq_intr: error, se 1, data 0x0, sh 0, priv 1, wave_id 1, simd_id 0, cu_id 11, err_type 2\n",
            "cuda_error",
            "accelerator-runtime-fault",
            "dmesg.txt",
        ),
        # mila-iqia/milabench#397 (case 6100): milabench's timm training (FocalNet) on AMD GPUs (ROCm): the HIP runtime aborts a queue with HSA_STATUS_ERROR_EXCEPTION 'An HSAIL operation resulted in a hardware exception' and to ...
        (
            '{"event": "line", "data": "VGPU(0x3b363240) Queue(0x773528db4000) is idle\\n", "pipe": "stdout"}\n{"event": "line", "data": ":0:rocdevice.cpp            :3586: 92087492418 us:  Callback: Queue 0x772c40900000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016\\n", "pipe": "stderr"}\n{"event": "line", "data": "/home/amd/milabench/benchmarks/timm/pytorch-image-models/train.py:1043: UserWarning: HIP warning: unspecified launch failure (Triggered internally at /app/pytorch/aten/src/ATen/hip/impl/HIPGuardImplMasqueradingAsCUDA.h:83.)\\n", "pipe": "stderr"}\n{"event": "line", "data": "  losses_m.update(loss.item() * accum_steps, input.size(0))\\n", "pipe": "stderr"}\n',
            "cuda_error",
            "accelerator-runtime-fault",
            "milabench.jsonl",
        ),
        # scverse/scvi-tools#3105 (case 6103): scvi-tools on an Apple M3 with the MPS backend: the model's output tensor (grad_fn LinearBackward0, device mps:0) is all nan, while the same run on the CPU works; NaN values in tra ...
        (
            "tensor([[nan, nan, nan,  ..., nan, nan, nan],\n        [nan, nan, nan,  ..., nan, nan, nan],\n        [nan, nan, nan,  ..., nan, nan, nan],\n        ...,\n        [nan, nan, nan,  ..., nan, nan, nan],\n        [nan, nan, nan,  ..., nan, nan, nan],\n        [nan, nan, nan,  ..., nan, nan, nan]], device='mps:0',\n       grad_fn=<LinearBackward0>)\n",
            "loss_divergence",
            "loss-nan-tensor-after-bar",
            "train.log",
        ),
        # pytorch/xla#7138 (case 6104): SPMD training on a TPU litepod-16 with torch_xla (PJRT), compilation cache disabled: one step in, pjrt_computation_client.cc F-checks 'Core halted unexpectedly: Accelerator device  ...
        (
            "  0%|          | 1/7800 [00:01<2:37:37,  1.21s/it]F0000 00:00:1717141650.890307    9276 pjrt_computation_client.cc:487] Non-OK-status: status status: INTERNAL: Core halted unexpectedly: INTERNAL: Accelerator device halted prematurely, perhaps due to an on-device check-failure. Node 0 halted unexpectedly at tag:pc TensorCoreSequencer:887:0x6f1 (from TensorCoreSequencer:887:0x3b91): no debugging message found for this tag:pc. HLO: fusion.1; HLO computation: SyncTensorsGraph.55205_spmd\n=== Source Location Trace: === \nlearning/45eac/tpu/runtime/hal/internal/tpu_program_termination_validation.cc:113\n\n*** Begin stack trace ***\n        tsl::CurrentStackTrace()\n\n        torch_xla::ReleaseGilAndTransferData(absl::lts_20230802::Span<std::shared_ptr<torch::lazy::BackendData> const>)\n        torch_xla::XLAGraphExecutor::GetTensors(std::vector<c10::intrusive_ptr<torch_xla::XLATensor, c10::detail::intrusive_target_default_null_type<torch_xla::XLATensor> >, std::allocator<c10::intrusive_ptr<torch_xla::XLATensor, c10::detail::intrusive_target_default_null_type<torch_xla::XLATensor> > > >*)\n        torch_xla::bridge::XlaCreateTensorList(c10::IListRef<at::Tensor> const&)\n",
            "framework_error",
            "tpu-program-halted",
            "train.log",
        ),
        # huggingface/transformers#9533 (case 6105): transformers' xla_spawn.py run_mlm on a TPU v3-32 with XRT_TPU_CONFIG naming one tpu_worker, as for a v3-8: torch_xla refuses with 'Invalid system configuration: 2x2 host topology  ...
        (
            'XRT_TPU_CONFIG="tpu_worker;0;10.157.150.13:8470"\npython transformers/examples/xla_spawn.py --num_cores 8 \\\n    transformers/examples/language-modeling/run_mlm.py \\\nInternal: Invalid system configuration: 2x2 host topology with 0 missing hosts, but 1 hosts in total.\n',
            "argument_error",
            "tpu-topology-mismatch",
            "train.log",
        ),
        # pytorch/xla#1016 (case 6106): torch_xla training on a TPU with only 1-2 steps per epoch: the XRT handle releaser's Check failed: session Run ... 'Unavailable: ... Driver not open' crashes the run, and the next  ...
        (
            "2019-09-08 19:00:58.593154: E tensorflow/compiler/xla/xla_client/tf_logging.cc:11] Check failed: session->session()->Run( feed_inputs, {}, {cached_node.operations[0]}, &outputs) == [3/161315]\now::Status::OK() (Unavailable: From /job:tpu_worker/replica:0/task:0:\nDriver not open. vs. OK)\n*** Begin stack trace ***\n        tensorflow::CurrentStackTrace[abi:cxx11]()\n        xla::XrtComputationClient::ReleaseHandles(std::vector<xla::XrtComputationClient::DeviceHandle, std::allocator<xla::XrtComputationClient::DeviceHandle> >*, std::function<xla::XrtSessi\non::CachedNode const& (xla::XrtSession*, tensorflow::Scope const&, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&)> const&, xla::metrics::Metric*, xla\n::metrics::Counter*)\n        xla::XrtComputationClient::HandleReleaser()\n        xla::util::TriggeredTask::Runner()\n\n\n        clone\n*** End stack trace ***\n",
            "framework_error",
            "tpu-program-halted",
            "train.log",
        ),
        # jax-ml/jax#19118 (case 6107): A JAX run on a TPU v4-128 pod exits silently in its eval step after 32 steps; the only trace is /tmp/tpu_logs' 'Halt is unexpected, all pending programs will fail. This is likely a ...
        (
            "E1224 22:35:53.165575   26868 real_program_continuator.cc:1331] 0x0x0_TC0: *** Halt is unexpected, all pending programs will fail. This is likely an XLA compiler bug, please file a bug to xla-tpu@ and CC tfrt-devs@.\n",
            "framework_error",
            "tpu-program-halted",
            "tpu_driver.ERROR",
        ),
        # jojkaart/ComfyUI-sampler-lcm-alternative#5 (case 2034): ComfyUI-sampler-lcm-alternative (LCM few-step sampling nodes for ComfyUI): its LCMScheduler node calls comfy.samplers.calculate_sigmas_scheduler, which a ComfyUI update removed, an ...
        (
            'got prompt\nError occurred when executing LCMScheduler:\n\nmodule \'comfy.samplers\' has no attribute \'calculate_sigmas_scheduler\'\n\nFile "D:\\ComfyUI_windows_portable\\ComfyUI\\execution.py", line 151, in recursive_execute\noutput_data, output_ui = get_output_data(obj, input_data_all)\n^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nFile "D:\\ComfyUI_windows_portable\\ComfyUI\\execution.py", line 81, in get_output_data\nreturn_values = map_node_over_list(obj, input_data_all, obj.FUNCTION, allow_interrupt=True)\n^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nFile "D:\\ComfyUI_windows_portable\\ComfyUI\\execution.py", line 74, in map_node_over_list\nresults.append(getattr(obj, func)(**slice_dict(input_data_all, i)))\n^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\nFile "D:\\ComfyUI_windows_portable\\ComfyUI\\custom_nodes\\ComfyUI-sampler-lcm-alternative\\sampler_lcm_alt.py", line 81, in get_sigmas\nsigmas = comfy.samplers.calculate_sigmas_scheduler(model.model, "sgm_uniform", total_steps).cpu()\n',
            "script_error",
            "cut-in-script",
            "comfyui.log",
        ),
        # IntelLabs/distiller#102 (case 4670): Thin: Distiller's compress_classifier.py training a preact_resnet20_cifar student with knowledge distillation (--kd-teacher preact_resnet44_cifar --kd-resume <teacher checkpoint>,  ...
        (
            '==> using cifar10 dataset\n=> creating preact_resnet44_cifar model for CIFAR10\n=> loading checkpoint logs/2018.12.11-130318/checkpoint.pth.tar\nCheckpoint keys:\nepoch\n\tarch\n\tstate_dict\n\tbest_top1\n\toptimizer\n\tcompression_sched\n\tquantizer_metadata\n   best top@1: 48.000\nLoaded compression schedule from checkpoint (epoch 2)\nLoaded quantizer metadata from the checkpoint\n\nTraceback (most recent call last):\n  File "compress_classifier.py", line 784, in <module>\n    main()\n  File "compress_classifier.py", line 359, in main\n    teacher, _, _ = apputils.load_checkpoint(teacher, chkpt_file=args.kd_resume)\n',
            "checkpoint_load_error",
            "cut-in-checkpoint-loading",
            "train.log",
        ),
        # VainF/Torch-Pruning#43 (case 4682): Thin: Torch-Pruning (from a source checkout) on FastSurfer's pretrained FastSurferCNN (axial weights): the reporter's torch_prune_test.py prints the first conv's pruning indices an ...
        (
            'RecursionError during pruning\nmodule name: encode1.conv0\npruning_idxs: [4, 5, 8, 9, 13, 14, 16, 17, 18, 19, 21, 23, 24, 26, 28, 30, 31, 32, 35, 36, 37, 38, 39, 40, 41, 43, 46, 48, 49, 53, 56, 58]\nTraceback (most recent call last):\n  File "/home/user04/projects/green_comp_neuro/FastSurfer/FastSurferCNN/torch_prune_test.py", line 159, in <module>\n    load_pretrained(pretrained_ckpt, params_model, model, dummy_data, save_path)\n  File "/home/user04/projects/green_comp_neuro/FastSurfer/FastSurferCNN/torch_prune_test.py", line 120, in load_pretrained\n    model = torch_prune(model, dummy_data, params_model[\'prune_type\'], params_model[\'prune_percent\'])\n  File "/home/user04/projects/green_comp_neuro/FastSurfer/FastSurferCNN/torch_prune_test.py", line 92, in torch_prune\n    pruning_plan = DG.get_pruning_plan( module, tp.prune_conv, idxs=pruning_idxs )\n  File "../../Torch-Pruning/torch_pruning/dependency.py", line 398, in get_pruning_plan\n    _fix_denpendency_graph(root_node, pruning_fn, idxs)\n  File "../../Torch-Pruning/torch_pruning/dependency.py", line 397, in _fix_denpendency_graph\n    _fix_denpendency_graph(dep.broken_node, dep.handler, new_indices)\n',
            "framework_error",
            "cut-in-framework",
            "train.log",
        ),
        # bghira/SimpleTuner#1775 (case 4941): Thin, off the round's subject (returned by the tiny-cuda-nn query): a new SimpleTuner fine-tuning run fails in accelerator.backward(loss); the reporter's paste starts with torch's  ...
        (
            'CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n\nTraceback (most recent call last):\n  File "/workspace/SimpleTuner/train.py", line 76, in <module>\n    trainer.train()\n  File "/workspace/SimpleTuner/helpers/training/trainer.py", line 2255, in train\n    self.accelerator.backward(loss)\n  File "/workspace/SimpleTuner/.venv/lib/python3.12/site-packages/accelerate/accelerator.py", line 2454, in backward\n    loss.backward(**kwargs)\n  File "/workspace/SimpleTuner/.venv/lib/python3.12/site-packages/torch/_tensor.py", line 648, in backward\n    torch.autograd.backward(\n  File "/workspace/SimpleTuner/.venv/lib/python3.12/site-packages/torch/autograd/__init__.py", line 353, in backward\n    _engine_run_backward(\n  File "/workspace/SimpleTuner/.venv/lib/python3.12/site-packages/torch/autograd/graph.py", line 824, in _engine_run_backward\n    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/workspace/SimpleTuner/.venv/lib/python3.12/site-packages/torch/ut\n',
            "cuda_error",
            "cuda-error-advice-alone",
            "train.log",
        ),
    ],
)
def test_round169_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # a traceback cut at the end of the excerpt is read by whose frame it ended in...
        (
            'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    main()\n',
            "script_error",
            "cut-in-script",
        ),
        (
            'Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", line 12, in forward\n    return self._call(x)\n',
            "framework_error",
            "cut-in-framework",
        ),
        # ... or by the checkpoint loader its last line calls
        (
            'Traceback (most recent call last):\n  File "train.py", line 12, in <module>\n    model.load_state_dict(torch.load(args.ckpt))\n',
            "checkpoint_load_error",
            "cut-in-checkpoint-loading",
        ),
        # and gives way to anything the run printed, an NCCL timeout's cascade included
        (
            'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total capacity)\nTraceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\n',
            "gpu_oom",
            "cuda-oom",
        ),
        (
            "[rank0]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n"
            'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    loss.backward()\n',
            "nccl_timeout",
            "nccl-watchdog-timeout",
        ),
        # torch's advice after a CUDA error is only read when the error's own line is lost
        (
            "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n",
            "framework_error",
            "cuda-device-assert",
        ),
        # the remote side's own error outranks the launcher's word that it could not start there
        (
            "Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n    import colossalai\nModuleNotFoundError: No module named 'colossalai'\n"
            "Error: failed to run torchrun --nproc_per_node=4 --nnodes=2 --node_rank=1 train.py on 10.0.0.12\n",
            "import_error",
            "import",
        ),
    ],
)
def test_cut_tracebacks_and_weak_readings_give_way(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
