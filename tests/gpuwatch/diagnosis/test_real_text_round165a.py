"""Classes of misses from issue 19's rounds one hundred and sixty-five to one hundred and sixty-eight (corpus cases
5871-5979: reports found by generic queries, any framework: mixed-precision training, multi-GPU inference and
serving, RL and RLHF training, jobs on shared clusters; taken as the search returned them), and one older case the
same class covers (2832). Error messages are verbatim from the public reports named in each test; hosts, paths and
pids may be made up."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # weiyithu/SurroundOcc#106 (case 5873): Thin: the user's one line that SurroundOcc's fp16 training 'went to NaN'; no error but the NaN: loss_divergence ...
        (
            '# fp16 went to NaN\n"Your project\'s fp16 crashed; fp16 went to NaN, this piece of junk."\n',
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # datawhalechina/hello-agents#434 (case 5877): A tutorial's SFT tool runs transformers' Trainer with fp16 loss scaling on a bf16 model: GradScaler's unscale fails with '"_amp_foreach_non_finite_check_and_unscale_cuda" not imple ...
        (
            '启动代码：python 11.6.1.py(直接运行11.6.1写的脚本)\n报错：{\n  "status": "error",\n  "message": "操作失败: \\"_amp_foreach_non_finite_check_and_unscale_cuda\\" not implemented for \'BFloat16\'",\n  "traceback": "Traceback (most recent call last):\\n  File \\"/work/lisihao/env/environments/agent/lib/python3.13/site-packages/hello_agents/tools/builtin/rl_training_tool.py\\", line 119, in run\\n    return self._handle_train(parameters)\\n           ~~~~~~~~~~~~~~~~~~^^^^^^^^^^^^\\n  File \\"/work/lisihao/env/environments/agent/lib/python3.13/site-packages/hello_agents/tools/builtin/rl_training_tool.py\\", line 188, in _handle_train\\n    result = self._train_sft(\\n        model_name=model_name,\\n    ...<9 lines>...\\n        wandb_project=wandb_project\\n    )\\n  File \\"/work/lisihao/env/environments/agent/lib/python3.13/site-packages/hello_agents/tools/builtin/rl_training_tool.py\\", line 472, in _train_sft\\n    trainer_wrapper.train()\\n    ~~~~~~~~~~~~~~~~~~~~~^^\\n  File \\"/work/lisihao/env/environments/agent/lib/python3.13/site-packages/hello_agents/rl/trainers.py\\", line 235, in train\\n    self.trainer.train()\\n    ~~~~~~~~~~~~~~~~~~^^\\n  File \\"/work/lisihao/env/environments/agent/lib/python3.13/site-packages/transformers/trainer.py\\", line 1424, in train\\n    return inner_training_loop(\\n        args=args,\\n    ...<2 lines>...\\n        ignore_keys_for_eval=ignore_keys\n',
            "framework_error",
            "kernel-dtype-not-implemented",
            "train.log",
        ),
        # plemeri/InSPyReNet#10 (case 5879): Thin: InSPyReNet trained with mixed_precision=True in its config returns NaN; the authors dropped mixed precision for worse results: loss_divergence ...
        (
            "# Training with mixed precision is returning NaN\nWhen using `mixed_precision=True` https://github.com/plemeri/InSPyReNet/blob/bfe08191800dc0d7212a931052e8ef4b679d7db7/configs/InSPyReNet_SwinB.yaml#L39, the model is returning NaN\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # bitsandbytes-foundation/bitsandbytes#663 (case 5883): Thin: Llama-2-70B 4-bit QLoRA with FlashAttention 2 and 8-bit Adam on an A6000; after about 20 steps the loss climbs instead of falling (fixed by bitsandbytes 0.41.1); the user's w ...
        (
            "# 4-bit QLoRA training diverges when using FlashAttention 2\nModel: Llama-2-70B\nCUDA: 11.8\nbitsandbytes version: 0.41.0\nPyTorch version: 2.0.1\nOS version: Ubuntu 22.04\nGPU: nVidia A6000 (the Ampere one)\nContext window: 4,096\nLearning rate: 1e-4\nOptimizer: 8-bit Adam\n\nFine-tuning Llama 2 with Flash Attention 2 diverges when done with 4-bit QLoRA, presumably due to some kind of numerical instability. Training appears to work initially, but after ~20 steps, loss starts diverging and getting larger instead of smaller. Setting the learning rate to 0 fixes it (but of course doesn't allow for fine-tuning).\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # clue-ai/ChatYuan#58 (case 5885): Thin: ChatYuan fine-tuning with FP16 enabled, the loss NaN throughout (Chinese); the user's words only: loss_divergence ...
        (
            "# 微调时无法使用FP16损失为nan\n您好，我在尝试微调过程中开启FP16加速训练 ，但loss一直为nan，想问下您如何使用FP16微调chatyuan，感谢！\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # motional/nuplan-devkit#91 (case 5888): Thin: nuPlan planner training with Lightning precision 16, training_loss 'nan'; the reporter traced it to fp16 overflow in additions and set precision 32: loss_divergence ...
        (
            "# training_loss is 'nan'\nI have solved this problem. The reason is that FP16 was used for high efficiency, but the overflow occurred in some addition operations, thus leaded to 'nan' data.\nMy solution is to modify the config file `nuplan/planning/script/config/training/lightning/default_lightning.yaml`\nprecision: 32 # 16\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # fastai/fastai#1551 (case 5890): Thin: fastai v1 tabular learner with to_fp16() on an RTX 2080 shows train_loss and valid_loss nan; the same code in fp32 trains: loss_divergence ...
        (
            "# Nan training/validation loss when using fp16\nWhen doing tabular learning in fp16 mode, `train_loss` and `valid_loss` in the plotted table are `nan`. This same code without `to_fp16()` works fine and displays loss numbers.\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # leejet/stable-diffusion.cpp#1753 (case 5900): Thin: sd-cli splitting the z_image_turbo diffusion model over cuda0&cuda1 crashes right after loading tensors with a CUDA error on device 1 (the message is cut in the report); work ...
        (
            "# [Bug] Crash during inference with z_image_turbo model on multi-GPU (CUDA)\niam@ai:~/AI/SD$ ./sd-cli -p \"a cat\" --backend \"diffusion=cuda0&cuda1\" --diffusion-model z_image_turbo-Q5_0.gguf --vae flux1vae.safetensors --llm Z-Image-AbliteratedV1.Q6_K.gguf\nggml_cuda_init: found 2 CUDA devices (Total VRAM: 19941 MiB):\n  Device 0: NVIDIA CMP 50HX, compute capability 7.5, VMM: yes, VRAM: 9970 MiB\n  Device 1: NVIDIA CMP 50HX, compute capability 7.5, VMM: yes, VRAM: 9970 MiB\n[INFO ] stable-diffusion.cpp:630  - loading diffusion model from 'z_image_turbo-Q5_0.gguf'\n[INFO ] model_loader.cpp:236  - load z_image_turbo-Q5_0.gguf using gguf format\n[INFO ] stable-diffusion.cpp:692  - loading llm from 'Z-Image-AbliteratedV1.Q6_K.gguf'\n[INFO ] model_loader.cpp:236  - load Z-Image-AbliteratedV1.Q6_K.gguf using gguf format\n[INFO ] stable-diffusion.cpp:706  - loading vae from 'flux1vae.safetensors'\n[INFO ] model_loader.cpp:239  - load flux1vae.safetensors using safetensors format\n[INFO ] stable-diffusion.cpp:757  - Version: Z-Image\n[INFO ] stable-diffusion.cpp:808  - Weight type stat:                      f32: 640  |    q5_0: 180  |    q8_0: 22   |    q6_K: 253 \n[INFO ] stable-diffusion.cpp:809  - Conditioner weight type stat:          f32: 145  |    q6_K: 253\n[INFO ] stable-diffusion.cpp:810  - Diffusion model weight type stat:      f32: 251  |    q5_0: 180  |    q8_0: 22\nThe application crashes right after loading the tensors with a CUDA error on the second device (device 1). Here is the log output:\n\n[INFO ] model_loader.cpp:1247 - loading tensors completed, taking 19.39s (read: 18.91s, memcpy: 0.00s, convert: 0.00s, copy_to_backend: 0.30s)\n[ERROR] ggml_extend.hpp:70   - CUDA\n",
            "cuda_error",
            "cuda-error-in-words",
            "train.log",
        ),
        # weiliu89/caffe#607 (case 5901): Thin: training one SSD model on two Titan X makes the host shut down now and then (two separate jobs on the two GPUs are fine); the maintainer's answer is the server's power: the m ...
        (
            "# Host shuts down when using multi-gpu\nWhen I use the two gpus to train different model, it's ok.\nHowever, when train one model in two gpus. the hosts shut down sometimes.\nanyone knows what's problem?\n\nI use cudnn5.1.3, cuda-7.5, TiTan X gpus, ubuntu 14.04.\n",
            "node_failure",
            "machine-down-in-words",
            "train.log",
        ),
        # facebookresearch/Detectron#29 (case 5902): Thin: an 8-GPU Mask R-CNN run powers the Ubuntu server off right at the start (it never reboots; ssh then says No route to host); the maintainer calls it a hardware (cooling/power) ...
        (
            "# Multi GPU training will close my ubuntu server\nssh: connect to host gpu-srv01 port 2180: No route to host\n\nI train 8 GPU Mask RCNN model. The training is right at the beginning. Then, Detrctron will close my Server. I can not catch any mistake.\nServer power off never reboot.\nEight Titan X\nconfigs/12_2017_baselines/mask_rcnn_X-101-32x8d-FPN_1x.yaml\n",
            "node_failure",
            "machine-down-in-words",
            "train.log",
        ),
        # iperov/DeepFaceLab#796 (case 5903): Thin: SAEHD training on a GTX 1080 Ti plus a Titan Xp makes the Windows PC switch itself off after minutes to hours, on a 1000 W supply; one GPU trains for a day: the machine died, ...
        (
            "# Unpredictable shutdown when I use 2 GPUs to train one model\n## Actual behavior\nMy computer shutdown when I train with 2 GPUs. It is totally unexpected; it could happen after 5 minutes or after 1 hour. Longest time training is 2 hours.\nYes, I know this seem clearly hardware related, but I have tested different case scenarios and I think the answer is not so simple\n- SeaSonic PRIME Titanium 1000 W \n(PC part picker says my PC estimated wattage is 838W)\n- If I use just the GTX 1080ti with same model and settings but batch=4, all works fine (training during 24 hours with no\n",
            "node_failure",
            "machine-down-in-words",
            "train.log",
        ),
        # modernmt/modernmt#547 (case 5904): Thin: ModernMT neural training with two GPUs blacks the machine out as soon as the Transformer starts, either card alone works; a bigger power supply fixed it: node_failure ...
        (
            "# Multiple GPUs = crash\nTraining with either GPU0 or GPU1 installed (i.e. by removing the other card manually) works. \n\nTraining with both cards inserted gives a black screen as soon as the Transformer is started for the neural training (the Transformer part isn't even logged: I see the model being made in training.log, and then everything stopts, even before the word Transformer can be logged).\nWith --gpus 0 it works when both cards are installed.\nMy CPU is 700 Watt, so I'm thinking this may be the issue. I will install a 1000 W PSU tomorrow.\n",
            "node_failure",
            "machine-down-in-words",
            "train.log",
        ),
        # sunnyxiaohu/R-C3D.pytorch#24 (case 5905): Thin: R-C3D training on two GTX 1080 Ti makes the system restart after a while; the maintainer asks about the power supply: the machine died, node_failure ...
        (
            "# Multi-GPU problem\nWhy do I start the program on two gtx 1080ti and the system will restart automatically after a while?\n",
            "node_failure",
            "machine-down-in-words",
            "train.log",
        ),
        # keras-team/keras#1990 (case 5906): Thin: fitting a Keras model on the GPU makes the machine throw a CPU error and switch off, about ten times on a MacBook and a Tesla server; the thread settles on overheating: node_ ...
        (
            "# CPU Error causing machine to shut down\nHas anyone else ever had their machine throw a CPU error and shut off while fitting a model on the GPU?\n\nThis has happened to me ~10 times, both on my Macbook Pro (GeForce GT 750M) and on a Dell server (Tesla M2070-Q).\n",
            "node_failure",
            "machine-down-in-words",
            "train.log",
        ),
        # BVLC/caffe#1281 (case 5907): Thin: a Dell workstation with two K40s crashes as soon as jobs run on both GPUs at once (feature extraction or fine-tuning alike), while any load on one GPU is fine; the user suspe ...
        (
            "# Machine crashes with two GPUs running at same time\nIf I am running all the jobs on a single GPU, it works fine. For example, I tried to run 4 feature extraction job and 1 fine-tuning job on a GPU, it works great.\n\nHowever, once I start running jobs on both GPU (K40), it crashes my machine, no matter what jobs I run. For example, if I run one feature extraction job on one GPU, and then start another feature extraction job on the other one, it crashes when it start forwarding the image blobs (it can load the model successfully).\n",
            "node_failure",
            "machine-down-in-words",
            "train.log",
        ),
        # facebookresearch/Detectron#312 (case 5908): Multi-GPU Detectron runs on a DGX-1 get stuck, and afterwards NVIDIA's nvvs diagnostic fails GPU6's memory test with 'Unable to create CUDA context' until a reboot: a GPU that fail ...
        (
            "# [Multi-GPU training error] risk to server\nMy server is DGX-1(V100). I have tried all your config models and the programs stuck when using more than 2 cards w / or w / o NCCL. Further, I notice if I tried multiple times, it will do harm to the server itself. When checking the cards using  \n`nvvs --configless`\n\nit reports\n                Memory GPU0 ....................................... PASS\n\t\tMemory GPU1 ....................................... PASS\n\t\tMemory GPU2 ....................................... PASS\n\t\tMemory GPU3 ....................................... PASS\n\t\tMemory GPU4 ....................................... PASS\n\t\tMemory GPU5 ....................................... PASS\n\t\tMemory GPU6 ....................................... FAIL\n\t\t   *** Unable to create CUDA context\n\t\t   *** Memory test initialization failed.\n\t\tMemory GPU7 ....................................... PASS\n\nThough reboot can fix the error card.\n",
            "gpu_hardware",
            "gpu-diagnostic-fail",
            "train.log",
        ),
        # PKU-YuanGroup/Video-LLaVA#105 (case 5909): Thin: Video-LLaVA inference with CUDA_VISIBLE_DEVICES=1,2 fails saying all tensors must be on one card (the traceback is a screenshot); one GPU works and the fix is device_map on o ...
        (
            "# 推理 GPU bug\nCUDA_VISIBLE_DEVICES=1 推理就没问题，但还CUDA_VISIBLE_DEVICES=1,2 两张卡推理就有问题，说是所有的张量 必须在一块卡上，这种情况下，如何设置多块卡 进行推理？\n",
            "script_error",
            "devices-mixed-in-words",
            "train.log",
        ),
        # matterport/Mask_RCNN#299 (case 5914): Thin: the Mask R-CNN demo run with GPU_COUNT=3 fails with an InvalidArgumentError in the model's own mrcnn_detection Reshape on tower_2 (the header of the message is cut); the thre ...
        (
            '# Demo: InvalidArgumentError, GPU_COUNT=3\n\t [[Node: tower_2/mask_rcnn/mrcnn_detection/Reshape_1 = Reshape[T=DT_FLOAT, Tshape=DT_INT32, _device="/job:localhost/replica:0/task:0/device:GPU:2"](tower_2/mask_rcnn/mrcnn_detection/packed, tower_2/mask_rcnn/mrcnn_detection/Reshape_1/shape)]]\n\t [[Node: tower_0/mask_rcnn/mrcnn_detection/map/TensorArrayUnstack/strided_slice/_7531 = _Recv[client_terminated=false, recv_device="/job:localhost/replica:0/task:0/device:CPU:0", send_device="/job:localhost/replica:0/task:0/device:GPU:0", send_device_incarnation=1, tensor_name="edge_10018_tower_0/mask_rcnn/mrcnn_detection/map/TensorArrayUnstack/strided_slice", tensor_type=DT_INT32, _device="/job:localhost/replica:0/task:0/device:CPU:0"]()]]\n',
            "script_error",
            "tf-reshape-node",
            "train.log",
        ),
        # huggingface/text-generation-inference#2238 (case 5915): Thin: TGI's launcher reports 'Shard process was signaled to shutdown with signal 4 rank=0' and ShardCannotStart while the A6000 is never used; a native crash (SIGILL) that only the ...
        (
            "# Shard process was signaled to shutdown with signal 4 rank=0 Error: ShardCannotStart\n",
            "framework_error",
            "tgi-shard-signal",
            "train.log",
        ),
        # vllm-project/vllm#6894 (case 5916): Distributed vLLM inference of a VL model dies with ProcessGroupNCCL's ncclCommWatchdog exception and Ray's terminate handler (the user: so slow that the connection closed); the wat ...
        (
            "# [Bug]: distributed inference for vl model crashed(so slow that the connection closed)\nframe #6: clone + 0x43 (0x7f51262bd353 in /lib/x86_64-linux-gnu/libc.so.6)\n\nException raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1418 (most recent call first):\nframe #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f50d8591897 in /opt/conda/lib/python3.10/site-packages/torch/lib/libc10.so)\nframe #1: <unknown function> + 0xe32e33 (0x7f50d94f4e33 in /opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)\nframe #2: <unknown function> + 0xdbbf4 (0x7f5125329bf4 in /opt/conda/bin/../lib/libstdc++.so.6)\nframe #3: <unknown function> + 0x8609 (0x7f51264f2609 in /lib/x86_64-linux-gnu/libpthread.so.0)\nframe #4: clone + 0x43 (0x7f51262bd353 in /lib/x86_64-linux-gnu/libc.so.6)\n\n[2024-07-29 08:05:22,154 E 4784 4918] logging.cc:115: Stack trace: \n /opt/conda/lib/python3.10/site-packages/ray/_raylet.so(+0x109aaea) [0x7f505135caea] ray::operator<<()\n/opt/conda/lib/python3.10/site-packages/ray/_raylet.so(+0x109dd72) [0x7f505135fd72] ray::TerminateHandler()\n/opt/conda/bin/../lib/libstdc++.so.6(+0xb135a) [0x7f51252ff35a] __cxxabiv1::__terminate()\n/opt/conda/bin/../lib/libstdc++.so.6(+0xb13c5) [0x7f51252ff3c5]\n/opt/conda/bin/../lib/libstdc++.so.6(+0xb134f) [0x7f51252ff34f]\n",
            "nccl_timeout",
            "nccl-watchdog-frames",
            "train.log",
        ),
        # hiyouga/EasyR1#109 (case 5930): Thin: EasyR1 GRPO training on 40GB cards, the user's own words only ('Out-of-Memory (OOM) errors while using GRPO Training'), asking how to spread the model over 8 GPUs; no error t ...
        (
            "# How to switch on the multi-GPU for GRPO Training?\nIssue:\nOOM errors during GRPO training - Need multi-GPU support for combined VRAM\n\nProblem Description:\nI'm encountering Out-of-Memory (OOM) errors while using GRPO Training to train reasoning capabilities similar to DeepSeek R1.\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # Joshua-Ren/Learning_dynamics_LLM#4 (case 5934): DPO training of Qwen-1.8B on 4 RTX6000 with batch size raised to 16: during eval metrics a CUDA kernel assertion 'indexSelectLargeIndex ... Assertion srcIndex < srcSelectDimSize fa ...
        (
            "# Any suggestion to speed up the dpo training?\npython -u train.py loss=dpo loss.beta=0.1 model=qwen18 exp_name=baseline_dpo_qwen18_ep6 trainer=BasicTrainer n_epochs=6 n_examples=30000 model.archive=baseline_sft_qwen18 save_ckp=true eval_every=1000\nindexSelectLargeIndex: block: [213,0,0], thread: [63,0,0] Assertion srcIndex < srcSelectDimSize failed. \nComputing eval metrics: 69%|#### | 22/32 [25:46<11:43, 70.32s/it] \nError executing job with overrides: ['loss=dpo', 'loss.beta=0.1', 'model=qwen18', 'exp_name=baseline_dpo_qwen18_ep6', 'trainer=BasicTrainer', 'n_epochs=6', 'n_examples=30000', 'model.archive=base_sft_qwen18_ep4', 'save_ckp=true', 'eval_every=1000', 'gradient_accumulation_steps=2'] Traceback (most recent call last):\n",
            "framework_error",
            "cuda-device-assert",
            "train.log",
        ),
        # huggingface/trl#2927 (case 5937): TRL GRPOTrainer on one or two H20s runs out of GPU memory after a few steps (the third step on 2 GPUs), also with vllm_gpu_memory_utilization lowered to 0.7 as suggested; only the  ...
        (
            "# Is there any problem with GRPOtrainer's memory usage?\nI test the problem in different per_device_train_batch_size and num_generations, I find that if I use one H20, `per_device_train_batch_size==4, num_generations==4`to train, it can continue some steps before OOM. But if I use 2 x H20, `per_device_train_batch_size==2, num_generations==4`to train, OOM occur early.\n...\nIt still encounters the OOM error at the third step. What's strange is that during the second step, each GPU only uses 40GB\n",
            "gpu_oom",
            "gpu-oom-in-words",
            "train.log",
        ),
        # TimZaman/dotaclient#34 (case 5938): Thin: the dotaclient PPO optimizer's log, iterations 9-12 with finite losses; the NaN itself is past the stored excerpt and known only from the title 'NaN in policy loss'. A policy ...
        (
            "# NaN in policy loss\n2019-02-03 08:03:28,062 INFO      epoch 3/4\n2019-02-03 08:03:32,274 INFO      epoch 4/4\n2019-02-03 08:03:36,499 INFO     steps_per_s=443.39, avg_weight_age=4.9, reward_per_sec=-0.0046, loss=0.2225, entropy=7.487, advantage=0.121\n2019-02-03 08:03:36,767 INFO     iteration 9/10000\n2019-02-03 08:03:40,356 INFO      epoch 1/4\n2019-02-03 08:03:44,524 INFO      epoch 2/4\n2019-02-03 08:03:48,800 INFO      epoch 3/4\n2019-02-03 08:03:53,079 INFO      epoch 4/4\n2019-02-03 08:03:57,397 INFO     steps_per_s=428.69, avg_weight_age=5.8, reward_per_sec=-0.0031, loss=0.1637, entropy=7.529, advantage=-0.027\n2019-02-03 08:03:57,624 INFO     iteration 10/10000\n2019-02-03 08:04:09,730 INFO      epoch 1/4\n2019-02-03 08:04:13,922 INFO      epoch 2/4\n2019-02-03 08:04:18,159 INFO      epoch 3/4\n2019-02-03 08:04:22,414 INFO      epoch 4/4\n2019-02-03 08:04:26,668 INFO     steps_per_s=297.42, avg_weight_age=4.4, reward_per_sec=-0.0052, loss=0.2684, entropy=7.551, advantage=0.137\n2019-02-03 08:04:26,937 INFO     iteration 11/10000\n2019-02-03 08:04:40,910 INFO      epoch 1/4\n2019-02-03 08:04:44,869 INFO      epoch 2/4\n2019-02-03 08:04:48,852 INFO      epoch 3/4\n2019-02-03 08:04:52,930 INFO      epoch 4/4\n2019-02-03 08:04:57,053 INFO     steps_per_s=277.99, avg_weight_age=5.0, reward_per_sec=-0.0055, loss=0.3511, entropy=7.519, advantage=0.157\n2019-02-03 08:04:57,328 INFO     iteration 12/10000\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # simonmeister/pysc2-rl-agents#6 (case 5939): Thin: pysc2 A2C agent, after about 60000 episodes the policy's action probabilities are all NaN; the maintainer saw it too on some minigames without finding the cause. Training val ...
        (
            "# NaNs output from the policy network\nHi, I was training the model for one of the minigames. And after about 60000 episodes, the policy for the actions probabilities output all NaNs,  I haven't been able to track down the problem yet, as it takes long to get to that point for debugging.\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # RLinf/RLinf#121 (case 5941): RLinf PPO fine-tuning of openvla-oft on libero_10: the policy loss becomes NaN after a few updates, later when value_lr is lowered; no exception, the training values diverge: loss_ ...
        (
            "# [Troubleshoot]: Nans in Policy Loss\nI am trying to finetune openvla-oft on the libero_10 envs in parallel. I am running the command `bash examples/embodiment/run_embodiment.sh libero_10_ppo_openvlaoft` but after a few update steps, the policy loss becomes nans. If I reduce the value_lr, the nans seem to appear later on in training.\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # MorvanZhou/Reinforcement-learning-with-tensorflow#99 (case 5942): REINFORCE (TensorFlow) on the user's own env: after every learn step the action probabilities are all NaN; the user traces it to dividing the episode's discounted rewards by their  ...
        (
            "# 关于learn过程中Nan问题\n用policy_gradient方法（是REINFORCE算法吧^_^）跑的时候，每次learn后，prob_weights输出都是[nan,..,nan]。\n`neg_log_prob = tf.reduce_sum(-tf.log(self.all_act_prob) * tf.one_hot(self.tf_acts, self.n_actions), axis=1)`\n`loss = tf.reduce_mean(neg_log_prob * self.tf_vt)`\n发现nan出现在每回合normalize reward中，\n`discounted_ep_rs /= np.std(discounted_ep_rs) `\n",
            "loss_divergence",
            "nan-in-words",
            "train.log",
        ),
        # OpenRLHF/OpenRLHF#556 (case 5943): OpenRLHF PPO submitted with ray job submit: after packaging the working directory (about a minute) the Ray dashboard answers HTTP 500 'No available agent to submit job'; the job ne ...
        (
            '# RuntimeError: Request failed with status code 500: No available agent to submit job, please try again later..\n使用ray进行ppo的时候，在creating a file package for local directory（会卡1分钟左右）之后，会报错`No available agent to submit job, please try again later..`\nray start --head --node-ip-address 0.0.0.0 --num-gpus 8 \\\n\nray job submit -v --address="http://127.0.0.1:8265" \\\n   --runtime-env-json=\'{"working_dir": "my_work_dir/rlhf/OpenRLHF/openrlhf"}\' \\\n   -- python3 -m $code_dir/openrlhf/cli/train_ppo_ray.py \\\n',
            "network_error",
            "ray-no-agent",
            "train.log",
        ),
        # OpenRLHF/OpenRLHF#360 (case 5945): OpenRLHF PPO of Qwen2-72B with Ray on 4 nodes, adam offload on: 'A worker died or was killed while executing a task by an unexpected system error' (the rest is a screenshot). The m ...
        (
            '# A worker died or was killed while executing a task by an unexpected system error.\n运行ppo_ray训练qwen2 72B的时候经常会报错\nray job submit --address="http://127.0.0.1:8265" \\\n    --runtime-env-json=\'{"working_dir": "/openrlhf", "pip": "/openrlhf/requirements.txt"}\' \\\n    -- python3 examples/train_ppo_ray.py \\\n    --ref_num_nodes 2 \\\n    --ref_num_gpus_per_node 8 \\\n    --actor_num_nodes 2 \\\n    --actor_num_gpus_per_node 8 \\\n    --vllm_num_engines 2 \\\n    --vllm_tensor_parallel_size 4 \\\n    --zero_stage 3 \\\n    --bf16 \\\n    --adam_offload \\\n',
            "host_oom",
            "ray-worker-vanished",
            "train.log",
        ),
        # PeterGriffinJin/Search-R1#126 (case 5946): Search-R1-style multi-turn tool training in verl switched from GRPO to PPO: verl's ray_trainer.py asserts 'only GRPO is tested for multi-turn with tool' on config.algorithm.adv_est ...
        (
            '# train with PPO in latest version of veRL\n在 https://github.com/zhaochenyang20/Awesome-ML-SYS-Tutorial/blob/main/rlhf/verl/multi-turn/tool_examples/verl-multiturn-searchR1-like_ZH.md 中，给出了GRPO进行训练的示例，但当我想尝试改为使用PPO的时候，会遇到AssertionError: only GRPO is tested for multi-turn with tool，原因在verl/trainer/ppo/ray_trainer.py的：\n`assert config.algorithm.adv_estimator in [AdvantageEstimator.GRPO], "only GRPO is tested for multi-turn with tool`\n',
            "argument_error",
            "assert-on-config",
            "train.log",
        ),
        # huggingface/trl#3097 (case 5948): Thin: TRL RewardTrainer under DeepSpeed fails with RuntimeError: 'weight' must be 2-D (torch's embedding given a ZeRO-3 partitioned, empty weight outside the gather); a RuntimeErro ...
        (
            "# Does RewardTrainer support DeepSpeed?\nWhen I use deepspeed to speed up the reward model training, an error occurs: [rank0]: RuntimeError: 'weight' must be 2-D\n",
            "framework_error",
            "embedding-weight-partitioned",
            "train.log",
        ),
        # nebuly-ai/optimate#262 (case 5949): ChatLLaMA RLHF training (opt-125m actor, DeepSpeed, batch size 1, fp16) fails with torch's RuntimeError 'Cannot re-initialize CUDA in forked subprocess'; a process forked after CUD ...
        (
            "# [Chatllama] RLHF Training - RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method\nI have already set the batch size to 1 and enabled fp16 in ds config.\n",
            "framework_error",
            "cuda-reinit-forked",
            "train.log",
        ),
        # ray-project/ray#41659 (case 5961): Ray Train TorchTrainer.fit() with transformers on a multi-node cluster: the workers cannot unpickle RayTrainReportCallback (Can't get attribute ... on the ray module), gone once th ...
        (
            "# Ray Core: Can't get attribute 'RayTrainReportCallback' on <module 'ray.train.huggingface.transformers._transformers_utils'\nray==2.8.0\nray-cpp==2.8.0\naccelerate==0.16.0\ntransformers==4.26.0\npytorch-lightning==1.9.5\ntorch==2.0.1\ntorchaudio==2.0.2\ntorchmetrics==1.2.1\ntorchvision==0.15.2\ndeepspeed==0.9.2\n\nget the error while running in cluster mode\nresults = trainer.fit()\n",
            "import_error",
            "ray-unpickle-missing-class",
            "train.log",
        ),
        # alibaba/ROLL#71 (case 5962): ROLL RL pipeline example on a one-node Ray cluster refuses to start: the job's resolved configuration asks for 2 nodes (AssertionError: The Ray clusters(ray_num_nodes: 1) cannot me ...
        (
            '# Error while training pipeline\nwhen I was trying to train the  pipeline examples, I got "AssertionError: The Ray clusters(ray_num_nodes: 1) cannot meet the required number of nodes (`num_nodes`2).", however, I have set num_nodes:1 in the config file.\n',
            "argument_error",
            "ray-cluster-too-small",
            "train.log",
        ),
        # facebookresearch/ScaDiver#10 (case 5963): Title only: ScaDiver's RLlib training through Ray Tune stops with TuneError 'insufficient cluster resources to launch trial'; the trial asks for more CPUs/GPUs than the Ray cluster ...
        (
            "# get 'ray.tune.error.tuneerror insufficient cluster resources to launch trial' when try to train\n",
            "argument_error",
            "ray-cluster-too-small",
            "train.log",
        ),
        # stevietrouble/EfficientZero#2 (case 5972): EfficientZero's Ray GPU worker dies as soon as training starts with only Ray's 'A worker died or was killed ... by an unexpected system error' and nothing in any log; worked around ...
        (
            "2022-07-07 19:05:41,609 WARNING worker.py:1404 -- A worker died or was killed\nwhile executing a task by an unexpected system error. To troubleshoot the\nproblem, check the logs for the dead worker. \nRayTask ID: ffffffffffffffff2aeefb9774b8f9463ffdfd8101000000\nWorker ID: 21602417afb8b58af6db10cb511242afac87db0eb5b09f5606320616 \nNode ID: 51e55bca411e9e811bf5c67089cbf9867f5f8374c2fce4a8370c987c \nWorker IP address: *\nWorker port: *\nWorker PID: 6218\n",
            "host_oom",
            "ray-worker-vanished",
            "train.log",
        ),
        # tensorflow/tensorflow#33960 (case 5977): Title only: a small Keras training run in a container on GCP's Kubernetes is OOMKilled (the same run as kubeflow/pipelines#2540, where it grew past 100GB on the default image and u ...
        (
            "# Docker/Kubernetes memory limits not respected? OOMKilled when deployed to GCP\nI'm very sorry, my time for this whole project was very limited, and I've worked around using `tensorflow/tensorflow:latest-py3`.\n",
            "host_oom",
            "oomkilled-in-words",
            "train.log",
        ),
        # kserve/kserve#2361 (case 5978): KServe 0.9 Triton predictor for the TensorFlow flowers example on a GPU: the pod restarts on every request and its description gives the reason OOMKilled (the logs only in screensh ...
        (
            "# Send inference request to TensorFlow Flowers example models cause Restart in GPU environment\nThe inference pod restart everything, when the request is sent by curl. Therefore, none of the requests have been successfully processed.\nTriton Pod description: there is an error reason called `OOMKilled`, may I know how to fix it?\n",
            "host_oom",
            "oomkilled-in-words",
            "train.log",
        ),
        # JoePenna/Dreambooth-Stable-Diffusion#15 (case 5979): Words only: Dreambooth Stable Diffusion training in a rented GPU pod's Jupyter Lab gets 'Killed' (the output in screenshots); the fix found was to kill the pod's running webui and  ...
        (
            '# training gets "Killed" ? not sure why\nI followed the steps in the video Aitrepreneur made and I keep coming across this error\nNot sure what is happening\n',
            "host_oom",
            "killed-in-words",
            "train.log",
        ),
        # yitu-opensource/T2T-ViT#26 (case 2832): T2T-ViT-14 trained on ImageNet-100 with the repository's timm-style distributed_train.sh on four GPUs (-b 128 --lr 1e-3 --weight-decay .03 --cutmix 0.0 --reprob 0.25, titled 'Nan d ...
        (
            '$ CUDA_VISIBLE_DEVICES=1,2,6,7 bash distributed_train.sh 4 /data/datasets/imagenet-100/ --model T2t_vit_14 -b 128 --lr 1e-3 --weight-decay .03 --cutmix 0.0 --reprob 0.25  --img-size 224\n200,4.4025687376658125,4.13563300743103,7.760000015258789,24.43999983520508\n201,4.374216079711914,4.1354576759338375,7.639999951171875,24.200000134277342\n202,4.392171382904053,4.136218957519532,7.7399999694824215,24.439999853515626\n203,4.384297768274943,4.140018928909302,7.659999923706055,24.29999981689453\n204,4.371897141138713,4.14544691696167,7.619999905395508,23.91999990234375\n205,4.374680519104004,4.1505038471221924,7.7600000366210935,23.93999978027344\n206,4.359750032424927,4.154387146377563,7.619999943542481,24.040000201416017\n207,4.37085485458374,4.158743778991699,7.820000009155273,24.019999743652345\n208,4.367704391479492,4.161868629837036,7.62000002746582,23.86000018310547\n209,nan,4.160795520019532,7.7200000274658205,24.01999976196289\n210,nan,nan,1.0,5.0\n211,nan,nan,1.0,5.0\n212,nan,nan,1.0,5.0\n213,nan,nan,1.0,5.0\n File "/home/ekrivosheev/cv_env/lib/python3.6/site-packages/apex/amp/handle.py", line 123, in scale\n',
            "loss_divergence",
            "epoch-row-nan",
            "train.log",
        ),
    ],
)
def test_round165_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # the words a report uses give way to the error the run printed
        ("# fp16 went to NaN\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n", "gpu_oom"),
        (
            "the hosts shut down sometimes\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nKeyError: 'labels'\n",
            "script_error",
        ),
        ("# OOMKilled?\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n", "gpu_oom"),
        (
            "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1418 (most recent call first):\n"
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n",
            "nccl_error",
        ),
    ],
)
def test_a_reports_words_give_way_to_a_printed_error(text: str, reason: str) -> None:
    assert reason_and_rule(text)[0] == reason


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("INFO: gRPC server shutdown complete\n", "machine-down-in-words"),  # a service stopping, not the machine
        ("step 100 | kl_divergence 0.031 | loss divergence 0.12\n", "nan-in-words"),  # a metric's name
        (
            "Shard process was signaled to shutdown with signal 15 rank=0\n",
            "tgi-shard-signal",
        ),  # the launcher's own stop
        ("maintenance window: nodes drained\n", "nan-in-words"),
    ],
)
def test_healthy_words_are_not_read_as_the_failure(text: str, rule: str) -> None:
    assert reason_and_rule(text)[1] != rule
