"""Classes of misses from issue 19's rounds seventy to seventy-two (corpus cases 3231-3254: GPU memory and CUDA faults
in LLM and diffusion fine-tuning; 3261-3281: managed and Kubernetes training platforms; 3291-3316: mistakes in the run
itself). Error messages are verbatim from the public reports named in each test; hosts, paths and pids may be made
up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    "text",
    [
        # meta-pytorch/torchtune#2776 (case 3253): the loss in a bar's description
        "|Loss: nan:   0%|                         | 3/3073 [00:15<4:04:50,  4.79s/it]\n",
        # huggingface/finetrainers#135 (case 3254): the loss in a bar's postfix, a logger's line glued after it
        "Training steps:   5%|▌         | 1/20 [02:06<40:10, 126.89s/it, loss=0.462, lr=2e-7]12/24/2024 16:49:44 - DEBUG - accelerate.tracking - Successfully logged to WandB\n"
        "12/24/2024 16:49:44 - DEBUG - finetrainers - Starting step 2\n"
        "Training steps:  10%|█         | 2/20 [04:11<36:54, 123.04s/it, loss=nan, lr=4e-7]12/24/2024 16:51:49 - DEBUG - accelerate.tracking - Successfully logged to WandB\n",
    ],
)
def test_a_loss_that_is_nan_at_the_end_of_the_log_is_divergence(text: str) -> None:
    assert reason_and_rule(text) == ("loss_divergence", "loss-not-finite-at-end")
    # a NaN loss the run left behind, its last loss finite again, says nothing by itself
    recovered = text + "Training steps:  15%|█▌        | 3/20 [06:17<35:07, 123.97s/it, loss=0.455, lr=6e-7]\n"
    assert reason_of(recovered) == "unknown"


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # aws/deep-learning-containers#3964 (case 3261): NCCL built against another CUDA
        (
            "algo-1:112:112 [0] misc/strongstream.cc:395 NCCL WARN Cuda failure 500 'named symbol not found'\n",
            "import_error",
            "emitter-gpu-build-mismatch",
        ),
        # aws/sagemaker-python-sdk#128 and huggingface/blog#114 (cases 3267, 3268)
        ("ClientError: Data download failed:Insufficient disk space\n", "storage_error", "storage"),
        (
            "UnexpectedStatusException: Error for Training job huggingface-pytorch-training-2021-05-31-01-39-31-463: Failed. Reason: ClientError: Artifact upload failed:Insufficient disk space\n",
            "storage_error",
            "storage",
        ),
        # tensorflow/models#3131 (case 3273): Cloud ML Engine's job status
        (
            "The replica master 0 ran out-of-memory and exited with a non-zero status of 247.\n",
            "host_oom",
            "emitter-cluster-k8s-oomkilled",
        ),
        # aws/sagemaker-python-sdk#134 (case 3276): a segfault only the platform reports
        ("AlgorithmError: Exit Code: 139\n", "framework_error", "segfault-in-text"),
        # kubeflow/trainer#2363 and a JobSet's podFailurePolicy (cases 3265, 3275): the API refusing the job's spec
        (
            'creating jobs: job "torch-test-trainer-node-0" creation failed with error: Job.batch "torch-test-trainer-node-0" is invalid: spec.template.spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources\n',
            "argument_error",
            "job-spec-refused",
        ),
        (
            'The Job is invalid: spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when podFailurePolicy is specified\n',
            "argument_error",
            "job-spec-refused",
        ),
        # Azure/AML-Kubernetes#58 (case 3279): a rank past the world size
        (
            "job-pytorch-distr-nccl-worker-1:25:25 [0] init.cc:981 NCCL WARN Invalid rank requested : 2/2\n",
            "argument_error",
            "job-spec-refused",
        ),
    ],
)
def test_a_platform_s_account_of_the_job(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_chained_traceback_on_one_line_cut_before_its_last_exception() -> None:
    # GoogleCloudPlatform/cloudml-samples#175 (case 3278): the earlier part's exception decides
    text = (
        'The replica worker 4 exited with a non-zero status of 1. Termination reason: Error. Traceback (most recent call last): [...] File "/usr/local/lib/python3.5/dist-packages/tensorflow/python/framework/errors_impl.py", line 473, in __exit__ '
        "c_api.TF_GetCode(self.status.status)) tensorflow.python.framework.errors_impl.UnavailableError: Stream removed During handling of the above exception, another exception occurred: Traceback (most recent call last): "
        'File "/usr/lib/python3.5/runpy.py", line 184, in _run_module_as_main "__main__", mod_spec) File "/root/.local/lib/python3.5/site-packages/object_detection/train.py",\n'
    )
    assert reason_and_rule(text, "job-status.txt") == ("network_error", "connection-reset")


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # Francis-Rings/StableAvatar#57 (case 3252): activation checkpointing's recompute, its header cut
        (
            "[rank0]: tensor at position 158:\n[rank0]: saved metadata: {'shape': torch.Size([5120]), 'dtype': torch.bfloat16, 'device': device(type='cuda', index=0)}\n"
            "[rank0]: recomputed metadata: {'shape': torch.Size([0]), 'dtype': torch.bfloat16, 'device': device(type='cuda', index=0)}\n",
            "framework_error",
            "checkpoint-recompute-mismatch",
        ),
        # ultralytics/ultralytics#18323 (case 3300)
        (
            "RuntimeError: Dataset 'custom_data.yaml' error ❌ \nDataset 'custom_data.yaml' images not found ⚠️, missing path '/content/datasets/valid/images'\n",
            "file_not_found",
            "dataset-missing-path",
        ),
        # haotian-liu/LLaVA#1808 (case 3308): transformers' lazy import
        (
            "RuntimeError: Failed to import transformers.trainer because of the following error (look up to see its traceback):\ncannot import name 'EncoderDecoderCache' from 'transformers' (/opt/conda/lib/python3.10/site-packages/transformers/__init__.py)\n",
            "import_error",
            "import",
        ),
        # huggingface/optimum-neuron#380 (case 3311): an example script's check of its options
        (
            "AssertionError: `train_file` should be a csv, a json or a txt file.\n",
            "argument_error",
            "recipe-option-required",
        ),
    ],
)
def test_the_run_s_own_mistakes_in_its_tools_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_collector_s_stream_name_is_read_past() -> None:
    # modelscope/facechain#171 (case 3316): "[stderr   ] " before each line; diffusers' check of --caption_column
    text = """
2023-09-04 08:11:57.460 [stderr   ] Traceback (most recent call last):
2023-09-04 08:11:57.460 [stderr   ]   File "/home/u/facechain/facechain/train_text_to_image_lora.py", line 1180, in <module>
2023-09-04 08:11:57.460 [stderr   ]     raise ValueError(
2023-09-04 08:11:57.460 [stderr   ] ValueError: --caption_column' value 'text' needs to be one of: image
"""
    assert normalize("2023-09-04 08:11:57.460 [stderr   ] ValueError: x")[0] == "ValueError: x"
    assert reason_and_rule(text) == ("argument_error", "recipe-option-required")
