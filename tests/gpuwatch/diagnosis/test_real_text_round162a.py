"""Classes of misses from issue 19's rounds one hundred and sixty-two to one hundred and sixty-four (corpus cases
5796-5862: reports found by generic queries, any framework: jobs that fail at start-up, long runs that crash after
hours or days, evaluation steps that crash; taken as the search returned them). Error messages are verbatim from the
public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # licyk/sd-webui-all-in-one#6 (case 5796): Thin: SD-Trainer (kohya lora-scripts GUI) on Windows, the start-training button flashes and the run ends: 'Failed to canonicalize script path, Training has ...
        (
            "Failed to canonicalize script path, Training has ended.\n",
            "file_not_found",
            "script-path-missing",
            "train.log",
        ),
        # dotnet/machinelearning-modelbuilder#2891 (case 5799): ML.NET Model Builder object-detection training (local CPU, and GPU also aborted) fails at start: 'The type initializer for 'TorchSharp.torch' threw an ...
        (
            "Error Message CPU Training\n\nThe type initializer for 'TorchSharp.torch' threw an exception.\n\nat Microsoft.ML.TorchSharp.Utils.TorchUtils.InitializeDevice(IHostEnvironment env)\n   at Microsoft.ML.TorchSharp.AutoFormerV2.ObjectDetectionTrainer.Trainer..ctor(ObjectDetectionTrain\n",
            "import_error",
            "torchsharp-init-failed",
            "train.log",
        ),
        # kohya-ss/sd-scripts#942 (case 5803): kohya_ss GUI DreamBooth on Windows: the GUI runs 'accelerate launch ... train_db.py' and cmd answers (title, in its English form) '"accelerate" is not an ...
        (
            '10:09:39-603125 INFO     SD v1.4 model selected.\n10:09:40-478740 INFO     Start training Dreambooth...\n10:09:40-480772 INFO     Valid image folder names found in: Z:\\111\\Image\n10:09:40-482757 INFO     Folder 100_Kaya : steps 2000\n10:09:40-484737 INFO     max_train_steps (2000 / 1 / 1 * 1 * 1) = 2000\n10:09:40-486736 INFO     stop_text_encoder_training = 0\n10:09:40-487736 INFO     lr_warmup_steps = 200\n10:09:40-489744 INFO     Saving training config to Z:\\111\\Model\\last_20231111-100940.json...\n10:09:40-492733 INFO     accelerate launch --num_cpu_threads_per_process=2 "./train_db.py" --enable_bucket\n                         --min_bucket_reso=256 --max_bucket_reso=2048\n                         --pretrained_model_name_or_path="runwayml/stable-diffusion-v1-5"\n                         --train_data_dir="Z:\\111\\Image" --resolution="512,512" --output_dir="Z:\\111\\Model"\n                         --logging_dir="Z:\\111\\Log" --save_model_as=safetensors --output_name="last"\n                         --lr_scheduler_num_cycles="1" --max_data_loader_n_workers="0" --learning_rate="1e-05"\n                         --lr_scheduler="cosine" --lr_warmup_steps="200" --train_batch_size="1" --max_train_steps="2000"\n"accelerate" is not an internal or external command, an executable program, or a batch file.\n',
            "file_not_found",
            "file-not-found",
            "train.log",
        ),
        # deepspeedai/DeepSpeed#4194 (case 5806): Thin: DeepSpeed-Chat on 8xV100, steps 1 and 2 fine, step 3 (RLHF, ZeRO-3) fails with 'assert param.ds_status == ZeroParamStatus.AVAILABLE, ...
        (
            "raise assert param.ds_status == ZeroParamStatus.AVAILABLE, param.ds_summary()\n",
            "framework_error",
            "zero-param-not-available",
            "train.log",
        ),
        # ubisoft/ubisoft-laforge-ZeroEGGS#18 (case 5808): Thin: ZeroEGGS training 'can not use cuda to train'; a second user quotes 'Attempting to deserialize object on a CUDA device but torch.cuda.is_available() ...
        (
            "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False.\n",
            "import_error",
            "cuda-checkpoint-without-cuda",
            "train.log",
        ),
        # StanfordMIMI/skm-tea#20 (case 5816): skm-tea tools/train_net.py with --num-gpus=2 (two 12GB GPUs): the module's __init__ builds the train dataloader and the sampler before Lightning sets up ...
        (
            'Traceback (most recent call last):\n  ...(ignore debugger stack)\n  File "/path/to/skm-tea/tools/train_net.py", line 139, in <module>\n    main(args)\n  File "/path/to/skm-tea/tools/train_net.py", line 99, in main\n    model = pl_module(cfg, num_parallel=num_gpus, eval_on_cpu=args.eval_on_cpu)\n  File "/path/to/skm-tea/skm_tea/engine/modules/module.py", line 243, in __init__\n    super().__init__(cfg, num_parallel, eval_on_cpu=eval_on_cpu, **kwargs)\n  File "/path/to/skm-tea/skm_tea/engine/modules/module.py", line 38, in __init__\n    super().__init__(\n  File "/path/to/skm-tea/skm_tea/engine/modules/base.py", line 56, in __init__\n    data_loader = self.train_dataloader(cfg)\n  File "/path/to/skm-tea/skm_tea/engine/modules/module.py", line 60, in train_dataloader\n    return datamodule.train_dataloader(cfg,\nprocess group not initialized\n',
            "framework_error",
            "process-group-not-initialized",
            "train.log",
        ),
        # koda-dernet/Side-Step#22 (case 5847): Side-Step fine-tuning started from the CLI its Advanced tab generated (Windows) closes at once with '[FAIL] --output-dir / -o is required (provide via CLI ...
        (
            "[FAIL] --output-dir / -o is required (provide via CLI or --config)\n",
            "argument_error",
            "cli-option-required",
            "train.log",
        ),
    ],
)
def test_round162_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


def test_a_required_option_in_prose_is_not_a_cli_refusal() -> None:
    """The CLI's words put the option first; a sentence about a value that is required is not them."""
    assert reason_and_rule("a GPU is required for --fp16 training\n")[1] != "cli-option-required"
