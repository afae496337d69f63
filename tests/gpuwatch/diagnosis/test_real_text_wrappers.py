"""Classes of misses from issue 19's sixth round (corpus cases 676-704): per-line prefixes that cloud
and console loggers put before every line of a traceback, wrappers that only point at another log,
CUDA libraries' own error wordings, the dynamic loader, builds that do not fit the GPU, and the run's
settings asking for what the GPU lacks. Error messages are verbatim from the public reports named in each
test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import log_source, reason_and_rule

# ---------------------------------------------------------------- per-line prefixes

# The same script-side traceback as each logger writes it: a ValueError raised in the script's own code.
_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "train.py", line 89, in main',
    "    all_metrics, _ = evaluator.evaluate(",
    "ValueError: too many values to unpack (expected 2)",
]


@pytest.mark.parametrize(
    "prefix",
    [
        "2022-08-03T06:42:13.917Z workerpool0-0 ",  # Vertex AI custom job (tensorflow/models#10735)
        "2022-10-13 12:51:44.934 CEST ",  # Cloud console export (GoogleCloudPlatform/t5x-on-vertex-ai#3)
        "2022-10-13 12:51:44 UTC ",
        "2024/03/04 02:41:55 ",  # Go's log package
        "[12:51:44] ",
        "[1,mpirank:0,algo-1]<stderr>:",  # SageMaker's mpirun (Lightning-AI/pytorch-lightning#20409)
        "[pod/trainer-0/pytorch] ",  # kubectl logs --prefix
        "trainer-1  | ",  # docker compose
        "worker-3: ",  # pdsh, as DeepSpeed's launcher runs it
        "gpu-node-07 trainer ",  # any constant host and program name
    ],
)
def test_a_traceback_is_read_behind_a_prefix_on_every_line(prefix: str) -> None:
    text = "\n".join(prefix + line for line in _TRACEBACK)
    assert reason_and_rule(text) == ("script_error", "exception-ValueError")


def test_a_prefix_whose_digits_change_from_line_to_line_is_still_one_prefix() -> None:
    """A sequence number or a clock the timestamp pattern does not know: same shape, other digits."""
    lines = [f"seq={n:04d} t=12:{n:02d} {line}" for n, line in enumerate(_TRACEBACK, 7)]
    assert reason_and_rule("\n".join(lines)) == ("script_error", "exception-ValueError")


def test_an_ipython_header_is_not_taken_for_a_prefix() -> None:
    """IPython writes the exception's name before "Traceback": its final line starts with that name and
    must not lose it."""
    text = """
ZeroDivisionError                         Traceback (most recent call last)
/tmp/ipykernel_3121/2411962466.py in <module>
----> 1 1 / 0
ZeroDivisionError: division by zero
"""
    assert reason_and_rule(text) == ("script_error", "exception-ZeroDivisionError")


def test_vertex_ai_workerpool_prefix_hides_no_traceback() -> None:
    """tensorflow/models#10735: every line starts with '<ISO time> workerpool0-0 '."""
    text = """
2022-08-03T06:41:58.201Z workerpool0-0 I0803 06:41:58.201135 139871 model_tpu_main.py:70] Training with TPUEstimator
2022-08-03T06:42:13.917Z workerpool0-0 Traceback (most recent call last):
2022-08-03T06:42:13.917Z workerpool0-0  File "object_detection/model_tpu_main.py", line 89, in main
2022-08-03T06:42:13.917Z workerpool0-0  tpu=[FLAGS.tpu_name], zone=FLAGS.tpu_zone, project=FLAGS.gcp_project))
2022-08-03T06:42:13.917Z workerpool0-0  File "/usr/local/lib/python3.6/dist-packages/tensorflow_core/python/distribute/cluster_resolver/tpu_cluster_resolver.py", line 262, in __init__
2022-08-03T06:42:13.917Z workerpool0-0  raise ValueError('Please provide a TPU Name to connect to.')
2022-08-03T06:42:13.917Z workerpool0-0 ValueError: Please provide a TPU Name to connect to.
2022-08-03T06:42:45.490Z service The replica workerpool0-0 exited with a non-zero status of 1.
"""
    reason, _ = reason_and_rule(text)
    assert reason != "unknown"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2022-10-13 12:51:44.934 CEST ValueError: x", "ValueError: x"),
        ("2022-10-13T12:51:44+0200 ValueError: x", "ValueError: x"),
        ("2024/03/04 02:41:55 XidCriticalError: Xid=48", "XidCriticalError: Xid=48"),
        ("[Mon Jan 31 18:04:25 2022] NVRM: Xid (PCI:0000:06:00): 79", "NVRM: Xid (PCI:0000:06:00): 79"),  # dmesg -T
        ("Jan 31 18:04:25 thot python3.10[2761]: RuntimeError: x", "RuntimeError: x"),  # syslog's program tag
        ("2022-10-13 12:51:44 ESTIMATOR failed", "ESTIMATOR failed"),  # a word is not a time zone
        ("2024-01-31T18:00:47+0100 thot python3[2761]: Killed", "Killed"),  # journalctl -o short-iso
        ("10/13/2022 12:51:44 - WARNING - __main__ - Process rank: 0", "__main__ - Process rank: 0"),  # HF examples
        ("[10/13/22 12:51:44] ERROR    Killed", "Killed"),  # rich's RichHandler
        ("2024-01-31 18:00:47.123 | ERROR    | __main__:main:12 - RuntimeError: x", "RuntimeError: x"),  # loguru
        ("ERROR:root:Killed", "Killed"),  # logging.basicConfig's LEVEL:logger:
        ("WARNING:tensorflow:Killed", "Killed"),
        # huggingface/accelerate#471: glog's fatal line glued to the end of a tqdm bar
        (
            "  1%|█▏        | 1/111 [00:06<12:12,  6.66s/it]2022-06-24 18:11:19.419635: F tensorflow/core/tpu/kernels/tpu_program_group.cc:86] Check failed: xla_tpu_programs.size() > 0 (0 vs. 0)",
            "F tensorflow/core/tpu/kernels/tpu_program_group.cc:86] Check failed: xla_tpu_programs.size() > 0 (0 vs. 0)",
        ),
    ],
)
def test_console_and_logger_prefixes_are_stripped(line: str, expected: str) -> None:
    assert normalize(line)[0] == expected


def test_sagemaker_mpirun_tag_names_the_rank() -> None:
    assert normalize("[1,mpirank:3,algo-2]<stderr>:RuntimeError: x") == ("RuntimeError: x", 3)


def test_a_framework_run_from_its_source_tree_is_still_the_framework() -> None:
    """GoogleCloudPlatform/t5x-on-vertex-ai#3: t5x runs from /t5x/t5x/ in its image, behind the console's
    '<time> CEST ' prefix; its evaluator and seqio disagree inside t5x's own train.py."""
    text = """
2022-10-13 12:51:44.800 CEST Traceback (most recent call last):
2022-10-13 12:51:44.801 CEST File "/usr/local/lib/python3.9/runpy.py", line 197, in _run_module_as_main
2022-10-13 12:51:44.818 CEST File "//./t5x/t5x/main.py", line 168, in main
2022-10-13 12:51:44.823 CEST run_with_gin()
2022-10-13 12:51:44.890 CEST  File "/usr/local/lib/python3.9/site-packages/gin/config.py", line 1582, in gin_wrapper
2022-10-13 12:51:44.917 CEST  return fn(*new_args, **new_kwargs)
2022-10-13 12:51:44.922 CEST  File "/t5x/t5x/train.py", line 648, in train
2022-10-13 12:51:44.930 CEST  all_metrics, _ = evaluator.evaluate(
2022-10-13 12:51:44.934 CEST ValueError: too many values to unpack (expected 2)
"""
    assert reason_and_rule(text) == ("framework_error", "exception-ValueError")


# ---------------------------------------------------------------- wrappers that only point elsewhere

_SAGEMAKER_NOTEBOOK = """
2024-11-09 00:25:02 Failed - Training job failed
---------------------------------------------------------------------------
UnexpectedStatusException                 Traceback (most recent call last)
Cell In[26], line 34
---> 34 estimator.fit({"training": inputs},
UnexpectedStatusException: Error for Training job model-res50-300k-noft-contra-aug-2024-11-09-00-18-33: Failed. Reason: AlgorithmError: ExecuteUserScriptError:
ExitCode 1
"""


def test_a_cloud_sdk_wrapper_does_not_outrank_the_job_log() -> None:
    """Lightning-AI/pytorch-lightning#20409: the notebook's UnexpectedStatusException only says the
    SageMaker job failed; the job's own log says how (here a kill the shell reports)."""
    job = log_source(
        "training-job.log",
        """
[1,mpirank:0,algo-1]<stdout>:Epoch 0:  99%|█████████▉| 2988/3000 [05:41<00:01,  8.75it/s, v_num=0, train_loss=2.310]
/opt/ml/code/train.sh: line 12:   341 Killed                  python s4_mod_pl_cloud_01.py
""",
    )
    d = diagnose_rules([log_source("notebook.log", _SAGEMAKER_NOTEBOOK), job])
    assert d.reason == "host_oom"


def test_a_cloud_sdk_wrapper_alone_is_a_weak_answer() -> None:
    d = diagnose_rules([log_source("notebook.log", _SAGEMAKER_NOTEBOOK)])
    assert d.rule_id == "wrapper-remote-job-failed"
    assert d.confidence < 0.7  # the LLM analyser, when configured, is asked


@pytest.mark.parametrize(
    "line",
    [
        "UnexpectedStatusException: Error for Processing job pp-2024-01-02: Failed. Reason: AlgorithmError: See job logs for more information",
        "RuntimeError: Job failed with:",  # Vertex AI SDK (google-cloud-aiplatform's jobs.py)
        "RuntimeError: Training failed with:",
        "The replica workerpool0-0 exited with a non-zero status of 1. To find out more about why your job exited please check the logs",
        "ray.train.base_trainer.TrainingFailedError: The Ray Train run failed. Please inspect the previous error messages for a cause.",
        "azureml._common.exceptions.ActivityFailedException: ActivityFailedException:",
        "mlflow.exceptions.ExecutionException: Run (ID '3b1c7c0e9f1d4e2a8f0e') failed",
        "torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with exit code 1",
        "torch.multiprocessing.spawn.ProcessRaisedException: ",
        "PyTorchJob default/llama-ft is failed because 1 Worker replica(s) failed.",  # Kubeflow's training operator
        "Warning  PyTorchJobRestarting  7m59s  pytorchjob-controller  PyTorchJob pt-job-1 is restarting because 1 Master replica(s) failed.",
    ],
)
def test_wrappers_of_other_processes_failures_are_cascades(line: str) -> None:
    d = diagnose_rules([log_source("client.log", line)])
    assert (d.rule_id, d.confidence < 0.7) == ("wrapper-remote-job-failed", True)


# ---------------------------------------------------------------- CUDA libraries in their own words


def _in_torch(message: str) -> str:
    """A message as the final exception of a traceback whose last frame is the script's."""
    return f"""
Traceback (most recent call last):
  File "/work/openfold/openfold/utils/loss.py", line 1972, in forward
    losses[loss_name] = loss_fn()
{message}
"""


@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: cusolver error: CUSOLVER_STATUS_INTERNAL_ERROR",  # aqlaboratory/openfold#471
        "RuntimeError: cusolver error: CUSOLVER_STATUS_EXECUTION_FAILED, when calling `cusolverDnSgetrf( handle, m, n, dA, ldda, static_cast<float*>(dataPtr.get()), ipiv, info)`",
        "RuntimeError: cuFFT error: CUFFT_INTERNAL_ERROR",
        "RuntimeError: cuFFT error: CUFFT_EXEC_FAILED",
        "RuntimeError: CURAND_STATUS_LAUNCH_FAILURE",
        "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR",
        "RuntimeError: cuDNN error: CUDNN_STATUS_MAPPING_ERROR",
        "RuntimeError: CUSPARSE_STATUS_INTERNAL_ERROR when calling `cusparseSpMM(handle, opa, opb, &alpha, descA, descB, &beta, descC, valueType, alg, dBuffer)`",
        "RuntimeError: cuSolver internal error",  # jaxlib's wording (kalininalab/alphafold_non_docker#22)
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: jaxlib/gpu/solver_kernels.cc:45: operation gpusolverDnCreate(&handle) failed: cuSolver internal error",
        "RuntimeError: jaxlib/cuda/cublas_kernels.cc:118: operation cublasCreate(&handle) failed: cuBlas execution failed",
        "tensorflow.python.framework.errors_impl.InternalError: Blas GEMM launch failed : a.shape=(32, 784), b.shape=(784, 10), m=32, n=10, k=784",
    ],
)
def test_cuda_library_failures_are_cuda_errors_wherever_raised(message: str) -> None:
    assert reason_and_rule(_in_torch(message))[0] == "cuda_error"


def test_cuda_library_out_of_memory_stays_gpu_oom() -> None:
    assert (
        reason_and_rule(
            _in_torch("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
        )[0]
        == "gpu_oom"
    )


# ---------------------------------------------------------------- the dynamic loader


@pytest.mark.parametrize(
    "message",
    [
        # aqlaboratory/openfold#226: two cuBLAS builds in one environment
        "OSError: /opt/conda/lib/python3.9/site-packages/torch/lib/../../../../libcublas.so.11: symbol cublasLtGetStatusString version libcublasLt.so.11 not defined in file libcublasLt.so.11 with link time reference",
        "OSError: /lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found (required by /opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_python.so)",
        "python: error while loading shared libraries: libpython3.10.so.1.0: cannot open shared object file: No such file or directory",
        "OSError: libcudart.so.12: cannot open shared object file: No such file or directory",
        "Could not load library libcudnn_cnn_infer.so.8. Error: libnvrtc.so: cannot open shared object file: No such file or directory",
        'OSError: [WinError 126] The specified module could not be found. Error loading "C:\\AI\\venv\\lib\\site-packages\\torch\\lib\\c10.dll" or one of its dependencies.',
        'OSError: [WinError 127] The specified procedure could not be found. Error loading "C:\\AI\\venv\\lib\\site-packages\\torch\\lib\\caffe2_nvrtc.dll" or one of its dependencies.',
        "OSError: /usr/local/lib/libnccl.so.2: wrong ELF class: ELFCLASS32",
        # Nerogar/OneTrainer#46: bitsandbytes' CPU-only library lacks the 8-bit optimizer's kernel (ctypes on Windows)
        "AttributeError: function 'cadam32bit_grad_fp32' not found",
    ],
)
def test_the_dynamic_loader_refusing_a_library_is_an_installation_problem(message: str) -> None:
    assert reason_and_rule(_in_torch(message))[0] == "import_error"


def test_bitsandbytes_cpu_build_then_a_bare_missing_kernel() -> None:
    """Nerogar/OneTrainer#46, as the UI's console showed it: no traceback, no exception name."""
    text = r"""
bin C:\AI\OneTrainer\venv\lib\site-packages\bitsandbytes\libbitsandbytes_cpu.so
C:\AI\OneTrainer\venv\lib\site-packages\bitsandbytes\cextension.py:34: UserWarning: The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit multiplication, and GPU quantization are unavailable.
  warn("The installed version of bitsandbytes was compiled without GPU support. "
function 'cadam32bit_grad_fp32' not found
"""
    assert reason_and_rule(text)[0] == "import_error"


# ---------------------------------------------------------------- builds that do not fit the GPU


@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: nvrtc: error: invalid value for --gpu-architecture (-arch)",  # RosettaCommons/RFdiffusion#289
        "RuntimeError: CUDA error: no kernel image is available",  # cut short (PapenfussLab/proteindj#12)
        "RuntimeError: CUDA error: CUBLAS_STATUS_ARCH_MISMATCH when calling `cublasCreate(handle)`",
        "RuntimeError: cuDNN error: CUDNN_STATUS_ARCH_MISMATCH",
        "ptxas fatal   : Value 'sm_90a' is not defined for option 'gpu-name'",
        "nvcc fatal   : Unsupported gpu architecture 'compute_89'",
    ],
)
def test_a_build_that_does_not_fit_the_gpu_is_an_installation_problem(message: str) -> None:
    assert reason_and_rule(_in_torch(message))[0] == "import_error"


def test_no_kernel_image_inside_a_nextflow_command_error_block() -> None:
    """PapenfussLab/proteindj#12: the traceback indented inside Nextflow's 'Command error:' block."""
    text = """
Command error:
  Error executing job with overrides: ['inference.output_prefix=rfd/fold', 'inference.num_designs=8', 'contigmap.contigs=[60-80]']
  Traceback (most recent call last):
    File "/app/RFdiffusion/scripts/run_inference.py", line 84, in main
      x_init, seq_init = sampler.sample_init()
    File "/app/RFdiffusion/rfdiffusion/inference/model_runners.py", line 326, in sample_init
      self._init_cyclic_reses(self.mask_str, self.contig_map)
  RuntimeError: CUDA error: no kernel image is available

  Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""
    assert reason_and_rule(text)[0] == "import_error"


# ---------------------------------------------------------------- the launch or the request, not the code


@pytest.mark.parametrize(
    "message",
    [
        # rwth-i6/i6_core#444: torch's env:// rendezvous under mpirun, not torchrun
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable RANK expected, but not set",
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR expected, but not set",
        "ValueError: Error initializing torch.distributed using tcp:// rendezvous: rank parameter missing",
        "KeyError: 'LOCAL_RANK'",
        # tensorflow/models#10735: the TPU's name is a flag the job was not given
        "ValueError: Please provide a TPU Name to connect to.",
    ],
)
def test_a_launch_that_lacks_what_the_run_needs_is_an_argument_error(message: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/rendezvous.py", line 220, in _get_env_or_raise
    raise _env_error(env_var)
{message}
"""
    assert reason_and_rule(text)[0] == "argument_error"


def test_a_cloud_api_refusing_the_jobs_request_is_an_argument_error() -> None:
    """GoogleCloudPlatform/vertex-ai-samples#213: the Vertex AI SDK in a notebook (IPython's layout, the
    exception's name with no 'Error'); the request, not the code."""
    text = """
_InactiveRpcError                         Traceback (most recent call last)
/opt/conda/lib/python3.7/site-packages/google/api_core/grpc_helpers.py in error_remapped_callable(*args, **kwargs)
---> 66             return callable_(*args, **kwargs)

The above exception was the direct cause of the following exception:

InvalidArgument                           Traceback (most recent call last)
/tmp/ipykernel_3121/2411962466.py in <module>
---> 17         accelerator_count=TRAIN_NGPU,
/opt/conda/lib/python3.7/site-packages/google/api_core/grpc_helpers.py in error_remapped_callable(*args, **kwargs)
---> 68             raise exceptions.from_grpc_error(exc) from exc

InvalidArgument: 400 Accelerator "NVIDIA_TESLA_K80" is not supported for machine type "n1-standard-4"
"""
    assert reason_and_rule(text)[0] == "argument_error"


@pytest.mark.parametrize(
    "message",
    [
        'google.api_core.exceptions.InvalidArgument: 400 Machine type "a2-highgpu-1g" is not supported.',
        "google.api_core.exceptions.FailedPrecondition: 400 The request is invalid",
        "botocore.exceptions.ClientError: An error occurred (ValidationException) when calling the CreateTrainingJob operation: Instance type ml.p3.2xlarge is not supported",
    ],
)
def test_cloud_request_refusals(message: str) -> None:
    assert reason_and_rule(message)[0] == "argument_error"


@pytest.mark.parametrize(
    "message",
    [
        "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",  # AdrianBZG/llama-multimodal-vqa#2
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: --dtype=half.",
        "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0",
    ],
)
def test_settings_that_ask_for_what_the_gpu_lacks_are_argument_errors(message: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/flash_attn/flash_attn_interface.py", line 51, in _flash_attn_forward
    out, q, k, v, out_padded, softmax_lse, S_dmask, rng_state = flash_attn_cuda.fwd(
{message}
"""
    assert reason_and_rule(text)[0] == "argument_error"


# ---------------------------------------------------------------- storage, NCCL's words, native crashes


def test_a_checkpoint_upload_refused_by_gcs_is_storage() -> None:
    """google-research/text-to-text-transfer-transformer#280: TensorFlow's retrying file system gives up
    on GCS; its 'may be due to a preemption' sentence is a guess, not evidence."""
    text = """
INFO:tensorflow:Saving checkpoints for 60 into gs://prot-transformers-eu/t5/models/uniref100/large/model.ckpt.
INFO:tensorflow:An error was raised. This may be due to a preemption in a connected worker or parameter server. The current session will be closed and a new session will be created.
All 10 retry attempts failed. The last failure: Unavailable: Error executing an HTTP request: HTTP response code 503
         when resuming upload gs://prot-transformers-eu/t5/models/uniref100/large/model.ckpt-60_temp_838179b3efeb4ecb90a79af73c170014/
         [[node save/SaveV2_1 (defined at /site-packages/mesh_tensorflow/transformer/utils.py:720) ]]
"""
    assert reason_and_rule(text)[0] == "storage_error"


def test_tensorflows_root_errors_are_read_in_their_details() -> None:
    """tensorflow/tensorflow#36510: 'InternalError: 2 root error(s) found.' says nothing; the lines after
    it carry NCCL's own result string ('unhandled cuda error') at NcclAllReduce."""
    text = """
Traceback (most recent call last):
  File "workspace/gpu_tests/test_gpus.py", line 60, in <module>
    model.fit(train_dataset, epochs=10)
  File "<string>", line 3, in raise_from
tensorflow.python.framework.errors_impl.InternalError: 2 root error(s) found.
  (0) Internal:  unhandled cuda error
         [[node Adam/NcclAllReduce (defined at workspace/gpu_tests/test_gpus.py:60) ]]
  (1) Internal:  unhandled cuda error
         [[node Adam/NcclAllReduce (defined at workspace/gpu_tests/test_gpus.py:60) ]]
0 successful operations.
"""
    assert reason_and_rule(text)[0] == "nccl_error"


@pytest.mark.parametrize(
    "lines",
    [
        # google-research/t5x#340: faulthandler's report, then bash's job control
        [
            "Fatal Python error: Segmentation fault",
            "./train_yelp_xxl.sh: line 34: 12024 Aborted                 (core dumped) python3 -m t5x.train --gin_file=x.gin",
        ],
        ["Fatal Python error: Aborted"],
        ["./run.sh: line 7: 4242 Aborted (core dumped) python train.py"],
        ["/var/spool/slurmd/job42/slurm_script: line 21: 48213 Segmentation fault      (core dumped) python train.py"],
    ],
)
def test_native_crashes_reported_by_python_or_the_shell(lines: list[str]) -> None:
    assert reason_and_rule("\n".join(lines))[0] == "framework_error"


# ---------------------------------------------------------------- a node that rebooted under the run

_VLLM_SYSLOG = """
Jan 31 18:00:57 thot python3.10[2761]: INFO 01-31 18:00:57 llm_engine.py:877] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.7 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%
Jan 31 18:01:02 thot python3.10[2761]: INFO 01-31 18:01:02 llm_engine.py:877] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 11.3 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%
Jan 31 18:04:25 thot systemd-modules-load[1291]: Inserted module 'lp'
Jan 31 18:04:25 thot systemd-modules-load[1291]: Inserted module 'ppdev'
Jan 31 18:04:25 thot systemd-modules-load[1291]: Inserted module 'parport_pc'
"""


def test_a_boot_after_the_runs_last_line_is_the_node_failing() -> None:
    """vllm-project/vllm#2692: generation runs, and three minutes later the next syslog line is the boot's
    module loading; no error was written."""
    d = diagnose_rules([log_source("syslog", _VLLM_SYSLOG, node="thot")])
    assert (d.reason, d.rule_id, d.node) == ("node_failure", "host-rebooted", "thot")


@pytest.mark.parametrize(
    "text",
    [
        # dmesg since boot: the banner is the log's first line
        "[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0) #101-Ubuntu SMP\n[    0.000000] Command line: BOOT_IMAGE=/boot/vmlinuz-5.15.0-91-generic",
        # no silence before it: systemd-modules-load restarted by hand, the run still logging
        "Jan 31 18:04:21 thot python3.10[2761]: INFO step 10\nJan 31 18:04:25 thot systemd-modules-load[1291]: Inserted module 'lp'",
        # the run trained after the boot: the reboot came before it
        "Jan 31 09:00:00 thot cron[811]: (root) CMD (true)\nJan 31 10:04:25 thot systemd-modules-load[1291]: Inserted module 'lp'\nJan 31 10:30:00 thot python3[4242]: step 120 | loss 2.31 | lr 3e-4",
    ],
)
def test_boots_that_are_not_the_run_ending(text: str) -> None:
    assert diagnose_rules([log_source("syslog", text)]).rule_id != "host-rebooted"


@pytest.mark.parametrize(
    "text",
    [
        # the kernel's clock back to zero in one dmesg capture
        "[88123.441201] NVRM: GPU at PCI:0000:3b:00: GPU-1d2e3f\n[    0.000000] Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045) (gcc) #101-Ubuntu SMP",
        # journalctl's own marker between boots
        "Jan 31 18:01:02 thot python3.10[2761]: INFO step 10\n-- Reboot --\nJan 31 18:04:25 thot kernel: Linux version 5.15.0-91-generic (buildd@lcy02-amd64-045) (gcc) #101-Ubuntu SMP",
    ],
)
def test_other_forms_of_a_reboot(text: str) -> None:
    assert diagnose_rules([log_source("kern.log", text)]).rule_id == "host-rebooted"


def test_an_error_before_the_reboot_outranks_it() -> None:
    text = _VLLM_SYSLOG.replace(
        "Jan 31 18:04:25 thot systemd-modules-load",
        "Jan 31 18:01:03 thot python3.10[2761]: RuntimeError: CUDA error: an illegal memory access was encountered\nJan 31 18:04:25 thot systemd-modules-load",
        1,
    )
    assert diagnose_rules([log_source("syslog", text)]).reason == "cuda_error"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        # Google API errors are named without "Error": the traceback's final line is still read
        (
            "google.api_core.exceptions.Forbidden: 403 POST https://storage.googleapis.com/upload/storage/v1/b/ckpt-bucket/o?uploadType=resumable: Caller does not have storage.objects.create access to the Google Cloud Storage object.",
            "permission_error",
        ),
        (
            "google.api_core.exceptions.PermissionDenied: 403 Permission 'aiplatform.customJobs.create' denied on resource",
            "permission_error",
        ),
        (
            "google.api_core.exceptions.NotFound: 404 GET https://storage.googleapis.com/download/storage/v1/b/ckpt-bucket/o/run7%2Flatest.pt?alt=media: No such object: ckpt-bucket/run7/latest.pt",
            "file_not_found",
        ),
        (
            "google.api_core.exceptions.Conflict: 409 Already exists: projects/p/locations/us-central1/customJobs/x",
            "script_error",
        ),
    ],
)
def test_google_api_exceptions_are_final_exceptions(message: str, reason: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "launch.py", line 12, in <module>
    job.run()
{message}
"""
    assert reason_and_rule(text)[0] == reason


def test_a_progress_line_inside_a_traceback_is_not_an_exception() -> None:
    text = """
Traceback (most recent call last):
  File "train.py", line 12, in <module>
Epoch: 100 | loss 2.3
    main()
ValueError: bad value
"""
    assert reason_and_rule(text) == ("script_error", "exception-ValueError")


def test_a_spawned_processs_own_error_outranks_the_spawn_wrapper() -> None:
    """mp.spawn re-raises a child's failure as ProcessRaisedException with the child's traceback after it;
    here the child was killed, which only the shell's line says."""
    text = """
Traceback (most recent call last):
  File "train.py", line 88, in <module>
    mp.spawn(main, nprocs=4)
  File "/usr/local/lib/python3.10/dist-packages/torch/multiprocessing/spawn.py", line 158, in join
    raise ProcessRaisedException(msg, error_index, failed_process.pid)
torch.multiprocessing.spawn.ProcessRaisedException:

-- Process 2 terminated with the following error:
Killed
"""
    assert reason_and_rule(text)[0] == "host_oom"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("[3] RuntimeError: x", ("RuntimeError: x", 3)),  # Intel MPI's -prepend-rank
        ("[12.345678] NVRM: x", ("NVRM: x", None)),  # a kernel clock is not a rank
    ],
)
def test_intel_mpi_rank_prefix(line: str, expected: tuple[str, int | None]) -> None:
    assert normalize(line) == expected
