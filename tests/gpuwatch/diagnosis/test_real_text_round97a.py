"""Classes of misses from issue 19's rounds ninety-seven to ninety-nine (corpus cases 4101-4123, 4131-4152 and
4161-4182: reports on CUDA trouble in training runs, schedulers, managed clusters and notebooks, and multimodal training
taken as the search returned them). Error messages are verbatim from the public reports named in each test; hosts,
paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # serend1p1ty/SeqNet#36 and ai4d-iasc/trixie#9 (cases 4109, 4111): torch refusing the node's old driver
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n",
            "import_error",
            "driver-does-not-fit",
        ),
        # bluer555/CR-GAN#8 (case 4103): CUDA's out of memory without its space
        ("RuntimeError: CUDA error:out of memory\n", "gpu_oom", "cuda-oom"),
        # hongwang01/RCDNet#5 (case 4101): a CUDA error in another casing
        ("[epoch 1][3/200] loss: 0.0859\nRuntimeError: CUDA Error: Out of Time\n", "cuda_error", "cuda-fault"),
        # aws/sagemaker-python-sdk#3319 (case 4141): a missing module quoted in SageMaker's error message
        ("ErrorMessage \"ModuleNotFoundError: No module named 'tensorflow'#015\n", "import_error", "import"),
        # aws/amazon-sagemaker-examples#3574 (case 4143): torchvision finding no data where it was pointed
        (
            "RuntimeError: Dataset not found. You can use download=True to download it\n",
            "file_not_found",
            "torchvision-dataset-not-found",
        ),
        # modelscope/ms-swift#3446 (case 4179): DDP's reducer seeing a hook fire twice, frames cut
        (
            "[rank0]: RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following reasons: 1) Use of a module parameter outside the `forward` function.\n",
            "framework_error",
            "ddp-marked-ready-twice",
        ),
        # AutodeskAILab/Clip-Forge#14 (case 4180): several GPUs in one device string
        ("  ...\nRuntimeError: Invalid device string: 'cuda:0,1,2'\n", "argument_error", "invalid-device-string"),
        # DLYuanGod/TinyGPT-V#30 (case 4172): the loader empty after re-reading its data
        (
            "  ...\nRuntimeError: Failed to fetch any data from dataloader after refresh.\n",
            "dataloader_error",
            "loader-empty-after-refresh",
        ),
    ],
)
def test_training_runs_in_their_own_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_torchs_warning_about_an_old_driver_stays_a_warning() -> None:
    # the guard: a run that went on after the warning and failed otherwise keeps its own failure (case 1562)
    text = (
        "/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:182: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver\n"
        "Floating point exception (core dumped)\n"
    )
    assert reason_of(text) == "framework_error"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # GoogleCloudPlatform/vertex-ai-samples#700 and google-deepmind/xmanager#29 (cases 4150, 4152): quota refusals
        (
            "google.api_core.exceptions.ResourceExhausted: 429 The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_tpu_v2\n",
            "argument_error",
            "cloud-quota-exceeded",
        ),
        # GoogleCloudPlatform/training-data-analyst#2284 (case 4151): AI Platform's quota failure in its JSON
        (
            '    "code": 429,\n    "message": "Quota failure for project qwiklabs-gcp-XXXXXXXX. The request for 2 K80 accelerators exceeds the allowed maximum of 0 A100, 0 K80.",\n    "status": "RESOURCE_EXHAUSTED",\n',
            "argument_error",
            "cloud-quota-exceeded",
        ),
        # LilyDaytoy/OpenPVSG#17 (case 4134): srun without the cluster's munge daemon
        (
            "srun: error: slurm_send_node_msg: auth_g_create: REQUEST_RESOURCE_ALLOCATION has authentication error\nsrun: error: If munged is up, restart with --num-threads=10\n",
            "network_error",
            "slurm-auth-service",
        ),
        # gunagg/zson#4 (case 4133): sbatch on a machine without the cluster's configuration
        (
            "sbatch: error: s_p_parse_file: unable to status file /etc/slurm-llnl/slurm.conf: No such file or directory, retrying in 1sec up to 60sec\n",
            "file_not_found",
            "missing-path-outside-python",
        ),
        # googlecolab/colabtools#2332 and #2538 (cases 4137, 4138): Colab's account of a kernel out of host memory
        (
            "In [7]: trainX = tf.keras.utils.to_categorical(trainX)\nYour session crashed after using all available RAM.\n",
            "host_oom",
            "kernel-oom-killer",
        ),
        # tensorflow/models#4342 (case 4149): a Cloud ML worker's gRPC failing at the system call
        (
            "worker-replica-2     raise type(e)(node_def, op, message)\nworker-replica-2 UnavailableError: OS Error\n",
            "network_error",
            "tf-grpc-unavailable-os-error",
        ),
    ],
)
def test_schedulers_clouds_and_notebooks(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)
