"""Classes of misses from issue 19's rounds one hundred and nine to one hundred and thirteen (corpus cases 4481-4601:
reports on RLHF training, speech training, diffusion training, training on Kubernetes and cloud services, and graph and
scientific models, taken as the search returned them). Error messages are verbatim from the public reports named in
each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # verl-project/verl#2355 (case 4482): a verl GRPO run's actor whose worker died, the death cause cut after its first sentence
        (
            "2025-07-03T14:20:51.566192279Z     raise ex\nThe actor is dead because its worker process has died.\n",
            "host_oom",
            "ray-actor-died-bare",
        ),
        # verl-project/verl#383 (case 4483): verl's main_ppo: a bare ActorDiedError
        (
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n",
            "host_oom",
            "ray-actor-died-bare",
        ),
        # Jiayi-Pan/TinyZero#58 (case 4487): TinyZero: the RayTaskError that re-raised an ActorDiedError
        (
            '  File "/home/wdxu/miniconda3/lib/python3.12/site-packages/hydra/core/utils.py", line 186, in run_job\n    ret.return_value = task_function(task_cfg)\n                       ^^^^^^^^^^^^^^^^^^^^^^^\n  File "/mnt/Data/wdxu/github/TinyZero_A100/verl/trainer/main_ppo.py", line 103, in main\n    ray.get(main_task.remote(config))\n  File "/home/wdxu/miniconda3/lib/python3.12/site-packages/ray/_private/auto_init_hook.py", line 21, in auto_init_wrapper\n    return fn(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^\n  File "/home/wdxu/miniconda3/lib/python3.12/site-packages/ray/_private/client_mode_hook.py", line 103, in wrapper\n    return func(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^^^^\n  File "/home/wdxu/miniconda3/lib/python3.12/site-packages/ray/_private/worker.py", line 2772, in get\n    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)\n                                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/home/wdxu/miniconda3/lib/python3.12/site-packages/ray/_private/worker.py", line 919, in get_objects\n    raise value.as_instanceof_cause()\nray.exceptions.RayTaskError(ActorDiedError): ray::main_task() (pid=1042684, ip=147.8.181.248)\n  File "/mnt/Data/wdxu/github/TinyZero_A100/verl/trainer/main_ppo.py", line 188, in main_task\n    trainer.init_workers()\n  File\n',
            "host_oom",
            "ray-actor-died-bare",
        ),
        # PeterGriffinJin/Search-R1#51 (case 4486): Search-R1: the death cause cut after SYSTEM_ERROR
        (
            "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit\n",
            "host_oom",
            "ray-actor-died-bare",
        ),
        # aws/aws-ofi-nccl#715 (case 4564): two SageMaker p4d instances: torch's DistBackendError with no more than 'NCCL error'
        (
            "torch.distributed.DistBackendError: NCCL error\n",
            "nccl_error",
            "nccl-distbackend-bare",
        ),
        # OpenRLHF/OpenRLHF#1064 (case 4490): OpenRLHF: a Ray task's re-raise of a DistBackendError
        (
            "ray.exceptions.RayTaskError(DistBackendError): ray::ReferenceModelActor.init_model_fro\n",
            "nccl_error",
            "nccl-distbackend-bare",
        ),
        # showlab/Tune-A-Video#97 (case 4542): Tune-A-Video: xFormers finds no kernel for the GPU it runs on
        (
            "NotImplementedError: No operator found for `memory_efficient_attention_forward`\n",
            "import_error",
            "xformers-no-operator",
        ),
        # victorchall/EveryDream2trainer#122 (case 4601): EveryDream2: every kernel refused, xFormers not built with CUDA
        (
            "p : 0.0\nflshattF is not supported because:\nxFormers wasn't build with CUDA support\ndtype=torch.float32 (supported: {torch.float16, torch.bfloat16})\ntritonflashattF is not supported because:\nxFormers wasn't build with CUDA support\ndtype=torch.float32 (supported: {torch.float16, torch.bfloat16})\nrequires A100 GPU\ncutlassF is not supported because:\nxFormers wasn't build with CUDA support\nsmallkF is not supported because:\nxFormers wasn't build with CUDA support\nmax(query.shape[-1] != value.shape[-1]) > 32\nunsupported embed per head: 40\n",
            "import_error",
            "xformers-no-operator",
        ),
        # facebookresearch/xformers#1263 (case 4544): xFormers refusing an attn_bias whose stride is not a multiple of 8
        (
            "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n     query       : shape=(2, 498, 8, 32) (torch.float16)\n     key         : shape=(2, 498, 8, 32) (torch.float16)\n     value       : shape=(2, 498, 8, 32) (torch.float16)\n     attn_bias   : <class 'torch.Tensor'>\n     p           : 0.0\n`fa3F@0.0.0` is not supported because:\n    min(query.shape[-1], value.shape[-1]) < 64\n    requires device with capability > (9, 0) but your GPU has capability (8, 9) (too old)\n    attn_bias type is <class 'torch.Tensor'>\n    operator wasn't built - see `python -m xformers.info` for more info\n    only head-dim 64, 128, 192 or 256 is supported\n`fa2F@2.5.7-pt` is not supported because:\n    attn_bias type is <class 'torch.Tensor'>\n`cutlassF-pt` is not supported because:\n    attn_bias.stride(-2) % 8 != 0 (attn_bias.stride() = (1984032, 248004, 498, 1))\n    attn_bias.stride(-2) % 8 != 0 (attn_bias.stride() = (1984032, 248004, 498, 1))\n    HINT: To use an `attn_bias` with a sequence length that is not a multiple of 8, you need to ensure memory is aligned by slicing a bigger tensor. Example: use `attn_bias = torch.zeros([1, 1, 5, 8])[:,:,:,:5]`\n",
            "framework_error",
            "xformers-attn-bias-alignment",
        ),
        # InternLM/InternEvo#375 (case 4504): InternEvo's own words for a NaN gradient norm
        (
            "Nan grad norm occurs, please check it\n",
            "loss_divergence",
            "grad-norm-nan-words",
        ),
        # MakazhanAlpamys/Soup#342 (case 4503): a GRPO run's NaN grad_norm before its sampler's assert on the probabilities
        (
            "grad_norm: nan\nprobability tensor contains either inf, nan or element < 0\n",
            "loss_divergence",
            "grad-norm-nan-words",
        ),
        # speechbrain/speechbrain#1462 (case 4517): SpeechBrain giving up on a non-finite loss
        (
            "ValueError: Loss is not finite and patience is exhausted. To debug, wrap `fit()` with autograd's `detect_anomaly()`, e.g.\n\nwith torch.autograd.detect_anomaly():\n\tbrain.fit(...)\n",
            "loss_divergence",
            "loss-not-finite-patience",
        ),
        # deepspeedai/DeepSpeed#4356 (case 4491): ZeRO-3's parameter registry, its raising line as the report quotes it
        (
            'RuntimeError(f"{param.ds_summary()} already in registry")\n',
            "framework_error",
            "deepspeed-param-already-in-registry",
        ),
        # deepspeedai/DeepSpeed#3518 (case 4494): DeepSpeed-Chat's hybrid engine on a bloomz actor: DeepSpeed's own container class
        (
            "AttributeError: 'DS_BloomContainer' object has no attribute 'set_params_wo_copy'\n",
            "framework_error",
            "deepspeed-class-attribute-error",
        ),
        # modelscope/ms-swift#5592 (case 4496): ms-swift's GRPO with vLLM refusing the launch and naming the one to use
        (
            "GRPO with vLLM is not compatible with device_map. Please set NPROC_PER_NODE equal to num_processes.\n",
            "argument_error",
            "trainer-refuses-launch-setting",
        ),
        # sunzeyeah/RLHF#13 (case 4492): DeepSpeed-Chat refusing GLM models in its hybrid engine
        (
            'assert not args.enable_hybrid_engine, "DeepSpeed currently does not support Pangu-based or GLM-based model in hybrid engine"\n',
            "argument_error",
            "trainer-refuses-launch-setting",
        ),
        # philschmid/deep-learning-pytorch-huggingface#83 (case 4495): TRL's client waiting for a vLLM server nobody started
        (
            "accelerate launch --num_processes 3 --config_file configs/accelerate_configs/deepspeed_zero3.yaml scripts/run_r1_grpo.py --config receipes/grpo-qwen-2.5-3b-deepseek-r1-countdown.yaml\nINFO:trl.extras.vllm_client:Server is not up yet. Retrying in 2.0 seconds...\nINFO:trl.extras.vllm_client:Server is not up yet. Retrying in 2.0 seconds...\n",
            "network_error",
            "vllm-server-not-up",
        ),
        # mlcommons/training#274 (case 4563): the shell's Killed written after a progress line
        (
            'loading annotations into memory...                                                                      ./run_and_time.sh: line 9: 23814 Killed                  python tools/train_net.py --config-file "confi gs/e2e_mask_rcnn_R_50_FPN_1x.yaml" SOLVER.IMS_PER_BATCH 1 TEST.IMS_PER_BATCH 1 SOLVER.MAX_ITER 72000 SO LVER.STEPS "(48000, 64000)" SOLVER.BASE_LR 0.0025                                                                                                                                                               real    0m22.562s                                                                                       user    0m14.024s                                                                                       sys     0m4.888s\n',
            "host_oom",
            "sigkill-in-text",
        ),
        # facebookresearch/LaViLa#42 (case 4571): a site's sbatch refusing a GPU request without a type
        (
            "submitit.core.utils.FailedJobError: sbatch: error: You must always specify a type when requesting gpu GRES sbatch: error: Batch job submission failed: Unspecified error\n",
            "argument_error",
            "emitter-cluster-slurm-request-refused",
        ),
        # deepspeedai/DeepSpeedExamples#750 (case 4505): DeepSpeed-Chat's own account of a SIGABRT
        (
            "Step3 Exits with Return Code = -6\n",
            "framework_error",
            "native-crash-reported",
        ),
        # PlayVoice/whisper-vits-svc#97 (case 4521): a Windows torch without NCCL, its raising line as quoted
        (
            'raise RuntimeError("Distributed package doesn\'t have NCCL " "built in")\n',
            "import_error",
            "torch-built-without",
        ),
        # JarodMica/ai-voice-cloning#61 (case 4526): a torch without CUDA in the interpreter used
        (
            "  File \"D:\\StoryTellerAI\\ai-voice-cloning-v2_0\\ai-voice-cloning\\src\\train.py\", line 29, in train\n    torch.cuda.set_device(opt['gpu_ids'][0])\n  File \"D:\\StoryTellerAI\\ai-voice-cloning-v2_0\\ai-voice-cloning\\venv\\Lib\\site-packages\\torch\\cuda\\__init__.py\", line 408, in set_device\n    torch._C._cuda_setDevice(device)\n    ^^^^^^^^^^^^^^^^^^^^^^^^\nAttributeError: module 'torch._C' has no attribute '_cuda_setDevice'\n",
            "import_error",
            "torch-built-without",
        ),
        # huggingface/blog#1042 (case 4514): a Colab cell's ImportError, its message cut
        (
            "---------------------------------------------------------------------------\n---------------------------------------------------------------------------\n\nImportError                               Traceback (most recent call last)\n\n[<ipython-input-20-ee532ae99f10>](https://localhost:8080/#) in <cell line: 3>()\n      1 from transformers import Seq2SeqTrainingArguments\n      2 \n----> 3 training_args = Seq2SeqTrainingAr\n",
            "import_error",
            "notebook-import-error-header",
        ),
        # GoogleCloudPlatform/vertex-ai-samples#509 (case 4560): Vertex AI refusing a job's spec, its message cut
        (
            "Step #3: InvalidArgument                           Traceback (most recent call last)\nStep #3: Input In [22], in <cell line: 1>()\nStep #3: ----> 1 custom_container_training_job.run(\nStep #3:       2     args=args,\nStep #3:       3     base_output_dir=gcs_output_uri_prefix,\nStep #3:       4     replica_count=replica_count,\nStep #3:       5     machine_type=machine_type,\nStep #3:       6     accelerator_count=accelerator_count,\nStep #3:       7     accelerator_type=accelerator_type,\nStep #3:       8     tensorboard=tensorboard.resource_name,\nStep #3:       9     service_account=SERVICE_ACCOUNT,\nStep #3:      10 )\nStep #3: \nStep #3: File ~/.local/lib/python3.9/site-packages/google/cloud/aiplatform/training_jobs.py:2944, in CustomContainerTrainingJob.run(self, dataset, annotation_schema_uri, model_display_name, model_labels, base_output_dir, service_account, network, bigquery_destination, args, environment_variables, replica_count, machine_type, accelerator_type, accelerator_count, boot_disk_type, boot_disk_size_gb, reduction_server_replica_count, reduction_server_machine_type, reduction_server_container_uri, training_fraction_split, validation_fraction_split, test_fraction_split, training_filter_split, validation_filter_split\n",
            "argument_error",
            "cloud-api-invalid-argument-header",
        ),
        # slp-rl/aero#21 (case 4528): AERO: an audio file libsndfile cannot read
        (
            "soundfile.LibsndfileError: <unprintable LibsndfileError object>\n",
            "dataloader_error",
            "audio-file-unreadable",
        ),
        # bastibe/python-soundfile#428 (case 4529): libsndfile's error with an unprintable message
        (
            "soundfile.LibsndfileError: <exception str() failed>\n",
            "dataloader_error",
            "audio-file-unreadable",
        ),
        # speechbrain/speechbrain#633 (case 4516): SpeechBrain on Windows: a DataLoader worker that cannot start
        (
            'EOFError: Ran out of input\nspeechbrain.core - Exception:\nTraceback (most recent call last):\n  File ".\\train.py", line 396, in <module>\n    asr_brain.fit(\n  File "f:\\codes\\python apps\\asr\\speechbrain-released\\speechbrain\\core.py", line 1008, in fit\n',
            "dataloader_error",
            "dataloader-spawn-ran-out-of-input",
        ),
        # endrikacupaj/LASAGNE#8 (case 4587): torch's CUDA generator refusing a capture
        (
            "geometric runtimeError: philox_cuda_state for an unexpected CUDA generator used during capture.\n",
            "framework_error",
            "torch-philox-capture",
        ),
        # ACEsuit/mace#321 (case 4590): LAMMPS with ML-MACE: the title's words
        (
            "Illegal memory access encountered\n                                                                                 LAMMPS_NS::Input::file() [0x2aaaab364a4d]\n",
            "cuda_error",
            "illegal-memory-access-title",
        ),
        # huggingface/notebooks#136 (case 4558): a SageMaker job asking the Hub for the model 'None'
        (
            "2022-01-25 19:29:56,293 - __main__ - INFO -  loaded test_dataset length is: 2000\n404 Client Error: Not Found for url: https://huggingface.co/None/resolve/main/config.json\n",
            "file_not_found",
            "hub-resolve-404",
        ),
        # torchmd/torchmd-net#77 (case 4592): torchmd-net: a loss printed as NaN after Lightning's bar
        (
            "Epoch 0:   1%|          | 31/5483 [00:06<19:36,  4.63it/s, loss=1.28e+07, v_num=_]tensor(11670.3730, device='cuda:0', grad_fn=<MseLossBackward0>) tensor(True, device='cuda:0') tensor(True, device='cuda:0')\nEpoch 0:   1%|          | 32/5483 [00:06<19:32,  4.65it/s, loss=1.25e+07, v_num=_]tensor(273794.6562, device='cuda:0', grad_fn=<MseLossBackward0>) tensor(True, device='cuda:0') tensor(True, device='cuda:0')\nEpoch 0:   1%|          | 33/5483 [00:07<19:28,  4.67it/s, loss=1.25e+07, v_num=_]tensor(nan, d\n",
            "loss_divergence",
            "loss-nan-tensor-after-bar",
        ),
        # hkust-nlp/dart-math#2 (case 4600): a retyped device-side assert, its misspellings kept
        (
            '".../torch/_tensor.py" line 1116, __contains___\n   return (element == self).any().item()\nRunetimeError: CUDA error: device-side asssert trigger\n',
            "framework_error",
            "cuda-device-assert",
        ),
        # NVIDIA/nccl#845 (case 4573): rank 3 waiting for rank 0's NCCL id until the store's socket timed out
        (
            "RuntimeError: [3] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by key '1', but store->get('1') got error: Socket Timeout Exception raised from recvByte\n",
            "argument_error",
            "nccl-id-never-published",
        ),
        # huggingface/trl#2340 (case 4499): TRL's PPO example: a text column left in the batch
        (
            'Traceback (most recent call last):\n  File "/u/student/2020/ai20resch11003/miniconda3/envs/rlhf_new/lib/python3.9/site-packages/transformers/tokenization_utils_base.py", line 782, in convert_to_tensors\n    tensor = as_tensor(value)\n  File "/u/student/2020/ai20resch11003/miniconda3/envs/rlhf_new/lib/python3.9/site-packages/transformers/tokenization_utils_base.py", line 738, in as_tensor\n    return torch.tensor(value)\nValueError: too many dimensions \'str\'\n',
            "dataloader_error",
            "input-pipeline-refuses-data",
        ),
        # huggingface/transformers#40977 (case 4513): the datasets library refusing a loading script
        (
            "RuntimeError: Dataset scripts are no longer supported, but found common_voice_11_0.py\n",
            "dataloader_error",
            "input-pipeline-refuses-data",
        ),
        # ArcInstitute/evo2#142 (case 4598): Transformer Engine's attention refusing the inputs, its frame's prefix elided
        (
            'File ".../transformer_engine/pytorch/attention.py", line 8319, in forward\nraise ValueError("No dot product attention support for the provided inputs!")\nValueError: No dot product attention support for the provided inputs!\n',
            "framework_error",
            "exception-ValueError",
        ),
    ],
)
def test_round109_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_workers_own_error_outranks_a_bare_actor_death() -> None:
    """A Ray actor's death with no cause is a consequence: the error its worker printed first is the answer."""
    text = (
        "(WorkerDict pid=4242) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 79.11 GiB of which 1.02 GiB is free.\n"
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
        "The actor is dead because its worker process has died.\n"
    )
    assert reason_and_rule(text)[0] == "gpu_oom"


def test_a_vllm_server_that_answers_late_gives_way_to_the_runs_own_error() -> None:
    """The weak network reading of TRL's retries yields to a failure the run itself reports."""
    text = (
        "INFO:trl.extras.vllm_client:Server is not up yet. Retrying in 2.0 seconds...\n"
        'Traceback (most recent call last):\n  File "/w/run_r1_grpo.py", line 88, in <module>\n    main()\n'
        "KeyError: 'prompt'\n"
    )
    assert reason_and_rule(text)[0] == "script_error"
