"""Classes of misses from issue 19's rounds one hundred and thirty-nine to one hundred and forty-one (corpus cases
5221-5295: reports on OCR and document AI training, speech recognition fine-tuning, and time-series and weather
forecasting model training, taken as the search returned them). Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # canopyai/Orpheus-TTS#215 (case 5248): Orpheus-TTS fine-tuning in Colab: a traceback cut in the optimizer step, then the title 'Cuda out of memory when tried finetuning'
        (
            'andb: Run wandb offline to turn off syncing.\nwandb: Syncing run 5e5-0\nwandb: ⭐️ View project at https://wandb.ai/davidguetta424-rajasthan-technical-university/tuning-orpheus\nwandb: 🚀 View run at https://wandb.ai/davidguetta424-rajasthan-technical-university/tuning-orpheus/runs/89x5bukn\nwandb: WARNING The run_name is currently set to the same value as TrainingArguments.output_dir. If this was not intended, please specify a different run name by setting the TrainingArguments.run_name parameter.\n0% 0/5983 [00:00<?, ?it/s]Traceback (most recent call last):\nFile "/content/Orpheus-TTS/finetune/train.py", line 52, in\ntrainer.train()\nFile "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2245, in train\nreturn inner_training_loop(\n^^^^^^^^^^^^^^^^^^^^\nFile "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2611, in _inner_training_loop\nself.optimizer.step()\nFile "/usr/local/lib/python3.11/dist-packages/accelerate/optimizer.py", line 178, in step\nself.optimizer.step(closure)\nFile "/usr/local/lib/python3.11/dist-packages/torch/optim/lr_scheduler.py", line 140, in wrapper\nCuda out of memory when tried finetuning , on 40gb A100 single gpu\n',
            "gpu_oom",
            "oom-in-words",
            "train.log",
        ),
        # kutaytire/Retrieval-Augmented-Time-Series-Forecasting#1 (case 5271): retrieval-augmented Chronos: 'CUDA Out of Memory Error when Running with --augment Flag', a title after the cut log
        (
            "$ python run_chronos.py /home/tifzaki/chronos-research/Retrieval-Augmented-Time-Series-Forecasting/configs/benchmark-1/etth.yaml result.csv --augment\n/home/tifzaki/miniconda3/envs/chronos-raf/lib/python3.12/site-packages/gluonts/json.py:102: UserWarning: Using `json`-module for json-handling. Consider installing one of `orjson`, `ujson` to speed up serialization and deserialization.\n  warnings.warn(\n2024-11-18 16:00:50,631 - Chronos Evaluation - INFO - Loading ETTh\n2024-11-18 16:00:54,155 - Chronos Evaluation - INFO - Generating forecasts for ETTh (4 time series)\n0it [00:00, ?it/s]/home/tifzaki/chronos-research/Retrieval-Augmented-Time-Series-Forecasting/time_series_utils.py:50: FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.\n  with torch.cuda.amp.autocast():\n0it [00:04, ?it/s]\n0it [00:05, ?it/s]\nCUDA Out of Memory Error when Running with --augment Flag\n",
            "gpu_oom",
            "oom-in-words",
            "train.log",
        ),
        # espnet/espnet#1860 (case 5259): ESPnet's transducer on eight V100s: DataParallel's caught RuntimeError, then 'encounter an illegal memory access' in the report's words
        (
            'j1-asr-train-v100-02:489125:489125 [7] NCCL INFO Ring 00 : 7[7] -> 0[0] via direct shared memory\ntj1-asr-train-v100-02:489125:489125 [0] NCCL INFO Launch mode Group/CGMD\nException in main training loop: Caught RuntimeError in replica 1 on device 1.\nOriginal Traceback (most recent call last):\n  File "/home/storage15/huangying/tools/anaconda3/envs/py36/lib/python3.6/site-packages/torch/nn/parallel/parallel_apply.py", line 60, in _worker\n    output = module(*input, **kwargs)\n  File "/home/storage15/huangying/tools/anaconda3/envs/py36/lib/python3.6/site-packages/torch/nn/modules/module.py", line 532, in __call__\n    result = self.forward(*input, **kwargs)\n  File "/home/storage15/huangying/tools/espnet/espnet/nets/pytorch_backend/e2e_asr_transducer.py", line 413, in forward\n    loss = self.criterion(pred_pad, target, pred_len, target_len)\nTraining transducer model encounter an illegal memory access\n',
            "cuda_error",
            "cuda-fault",
            "train.log",
        ),
        # flashlight/wav2letter#255 (case 5254): wav2letter 400 hours into training: the CTC loss back-end's status error
        (
            "Error: compute_ctc_loss, stat = unknown error\n",
            "framework_error",
            "ctc-loss-status",
            "train.log",
        ),
        # timeseriesAI/tsai#8 (case 5275): timeseriesAI's fit_one_cycle: the C library's 'Can not allocate memory' on its own line
        (
            "CUDA cannot allocate memory error\nlearn.fit_one_cycle()\nCan not allocate memory\n",
            "host_oom",
            "enomem-bare",
            "train.log",
        ),
    ],
)
def test_round139_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


def test_the_c_librarys_bare_enomem_gives_way_to_the_error_the_run_printed() -> None:
    """A bare "Can not allocate memory" is weak: a GPU out-of-memory the run printed is the answer."""
    text = "Can not allocate memory\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert reason_and_rule(text)[0] == "gpu_oom"


def test_a_ctc_status_that_names_the_memory_is_not_read_as_the_frameworks() -> None:
    text = "Error: compute_ctc_loss, stat = out of memory\n"
    assert reason_and_rule(text)[1] != "ctc-loss-status"
