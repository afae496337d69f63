"""Classes of misses from issue 19's eighth round, first half (corpus cases 777-807, LLM and NLP training,
fine-tuning and serving tools): a plain ``Exception``, tracebacks cut at torch's dispatch to forward, an
exception quoted above the frame that raised it, LLM training frameworks installed as packages, a library
refusing a setting, argparse's usage block and exit status, a data pipeline's own threads and decoders,
network errors re-raised by a DataLoader worker, a model directory without the file a library needs, a
checkpoint of the wrong kind, and native checks and assertions with no writer's prefix. Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.engine import diagnose_rules
from tests.gpuwatch.diagnosis.real_text import log_source, reason_of

# ---------------------------------------------------------------- a plain Exception

# facebookresearch/fairseq#780: old torch's mp.spawn raises a plain Exception whose message (the child's
# traceback) follows on the next lines; the child's own is fairseq's check that the workers are in step.
_FAIRSEQ_UNPICKLE = """
| epoch 002:  15300 / 41687 loss=3.211, nll_loss=1.497, ppl=2.82, wps=33230, ups=0, wpb=81221.187, bsz=4526.611, num_updates=56988, lr=0.000132467, gnorm=0.213, clip=0.000, oom=0.000, wall=142130, train_wall=135888
Traceback (most recent call last):
  File "/home/ubuntu/.local/bin/fairseq-train", line 11, in <module>
    load_entry_point('fairseq', 'console_scripts', 'fairseq-train')()
  File "/home/ubuntu/.local/lib/python3.6/site-packages/torch/multiprocessing/spawn.py", line 114, in join
    raise Exception(msg)
Exception:

-- Process 5 terminated with the following error:
Traceback (most recent call last):
  File "/home/ubuntu/workspace/fairseq/fairseq/distributed_utils.py", line 178, in all_gather_list
    'Unable to unpickle data from other workers. all_gather_list requires all '
Exception: Unable to unpickle data from other workers. all_gather_list requires all workers to enter the function together, so this error usually indicates that the workers have fallen out of sync somehow. Workers can fall out of sync if one of them runs out of memory, or if there are other conditions in your training script that can cause one worker to finish an epoch while other workers are still iterating over their portions of the data.
"""


def test_a_plain_exception_raised_in_a_framework_is_a_framework_error() -> None:
    d = diagnose_rules([log_source("train.log", _FAIRSEQ_UNPICKLE)])
    assert d.reason == "framework_error"
    assert "Unable to unpickle" in d.evidence[0].text


def test_a_plain_exception_raised_in_the_script_is_a_script_error() -> None:
    text = 'Traceback (most recent call last):\n  File "/home/me/train.py", line 40, in <module>\n    raise Exception("no samples left after filtering")\nException: no samples left after filtering'
    assert reason_of(text) == "script_error"


def test_a_plain_exception_with_no_message_is_not_the_cause() -> None:
    """mp.spawn's wrapper says only ``Exception:``; what it wraps decides (here a user KeyError)."""
    text = _FAIRSEQ_UNPICKLE.split("-- Process 5")[0] + (
        '-- Process 5 terminated with the following error:\nTraceback (most recent call last):\n  File "/home/me/train.py", line 88, in main\n    batch["target"]\nKeyError: \'target\''
    )
    assert reason_of(text) == "script_error"


# ---------------------------------------------------------------- where the exception was raised

# OptimalScale/LMFlow#588: the excerpt ends at torch's dispatch to forward; the ValueError was raised in
# the model's own code, which the excerpt does not show.
_LMFLOW_CUT = """
Traceback (most recent call last):
  File "/data1/lgz/Finetune/LMFlow/examples/finetune.py", line 57, in main
    tuned_model = finetuner.tune(model=model, dataset=dataset)
  File "/data1/lgz/Finetune/Packages/transformers/src/transformers/trainer.py", line 2684, in compute_loss
    outputs = model(**inputs)
  File "/data1/.conda/lmflow/lib/python3.9/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl
    return forward_call(*args, **kwargs)
ValueError: 130000 is not in list
"""


def test_a_traceback_cut_at_torchs_dispatch_to_forward_does_not_blame_torch() -> None:
    assert reason_of(_LMFLOW_CUT) == "script_error"


def test_the_frame_after_the_dispatch_still_decides_when_it_is_shown() -> None:
    shown = _LMFLOW_CUT.replace(
        "ValueError:",
        '  File "/data1/.conda/lmflow/lib/python3.9/site-packages/transformers/models/llama/modeling_llama.py", line 655, in forward\n    raise ValueError("130000 is not in list")\nValueError:',
    )
    assert reason_of(shown) == "framework_error"


def test_an_exception_quoted_above_the_frame_that_raised_it() -> None:
    """OpenSQZ/MiniCPM-V-CookBook#17: the TypeError first, then the transformers frame that raised it."""
    text = """
TypeError: 'NoneType' object is not iterable
  File ".../transformers/modeling_utils.py", line 5841, in caching_allocator_warmup
    re.compile("|".join([re.escape(plan) for plan in model._tp_plan]))
"""
    assert reason_of(text) == "framework_error"


def test_frames_under_an_exception_that_lead_to_their_own_exception_are_another_traceback() -> None:
    """They are not taken as the first one's frame: the scan reads them and their exception."""
    text = """
RuntimeError: step 120 failed, retrying
  File "/home/me/train.py", line 12, in <module>
    main()
KeyError: 'labels'
"""
    assert reason_of(text) == "script_error"


@pytest.mark.parametrize(
    "frame",
    [
        # erfanzar/EasyDeL#71
        '  File "/usr/local/lib/python3.10/dist-packages/EasyDel/trainer/causal_language_model_trainer.py", line 381, in configure_model',
        '  File "/opt/conda/lib/python3.10/site-packages/llamafactory/train/sft/workflow.py", line 96, in run_sft',
        '  File "/opt/conda/lib/python3.10/site-packages/swift/trainers/rlhf_trainer/rollout_mixin.py", line 797, in _engine_infer',
        '  File "/opt/conda/lib/python3.10/site-packages/xtuner/engine/runner/loops.py", line 31, in run',
    ],
)
def test_code_bug_wording_inside_an_llm_training_framework_is_the_frameworks(frame: str) -> None:
    text = f'Traceback (most recent call last):\n  File "/root/train.py", line 94, in <module>\n    trainer = Trainer(args)\n{frame}\n    x = cfg["config"]\nTypeError: \'NoneType\' object is not subscriptable'
    assert reason_of(text) == "framework_error"


def test_code_bug_wording_inside_an_application_package_stays_the_applications() -> None:
    text = 'Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/labml_nn/transformers/train.py", line 50, in run\n    x = self.cfg["config"]\nTypeError: \'NoneType\' object is not subscriptable'
    assert reason_of(text) == "script_error"


# ---------------------------------------------------------------- the options, not the code


@pytest.mark.parametrize(
    "line",
    [
        # Lightning-AI/litgpt#712
        "NotImplementedError: Quantization is currently not supported for multi-GPU training. Please set devices=1 when using the --quantize flag.",
        # flagos-ai/FlagScale#1295, behind torchrun's prefixes
        "[default3]:[rank3]: AssertionError: Tokenizer path must be specified.",
        "ValueError: data_path must be provided when do_train is set",
    ],
)
def test_a_library_refusing_a_setting_is_an_argument_error(line: str) -> None:
    assert reason_of(f"[INFO] building model\n{line}") == "argument_error"


# FlagAI-Open/FlagAI#336: the usage block survived, the "error:" line under it did not; torchrun reports
# argparse's exit status.
_FLAGAI_USAGE = """
                      [--save_interval SAVE_INTERVAL] [--save_dir SAVE_DIR] [--load_dir LOAD_DIR] [--save_optim SAVE_OPTIM] [--save_rng SAVE_RNG] [--load_type LOAD_TYPE]
                      [--load_optim LOAD_OPTIM] [--load_rng LOAD_RNG] [--tensorboard TENSORBOARD] [--tensorboard_dir TENSORBOARD_DIR]
                      [--bmt_loss_scale_steps BMT_LOSS_SCALE_STEPS] [--lora LORA] [--lora_r LORA_R] [--lora_alpha LORA_ALPHA] [--lora_dropout LORA_DROPOUT]
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 2) local_rank: 0 (pid: 28133) of binary: /opt/conda/bin/python
"""


def test_argparses_usage_block_and_exit_status_are_an_argument_error() -> None:
    assert reason_of(_FLAGAI_USAGE, "torchrun.log") == "argument_error"


def test_exit_status_2_is_weaker_than_an_error_that_says_more() -> None:
    text = (
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/aquila/tokenizer.json'\n"
        + _FLAGAI_USAGE.splitlines()[-1]
    )
    assert reason_of(text, "torchrun.log") == "file_not_found"


# ---------------------------------------------------------------- data pipelines in their own words


@pytest.mark.parametrize(
    "text",
    [
        # allenai/OLMo#552
        "[2024-04-18 19:06:17] INFO     [olmo.train:816, rank=0] [step=75/739328]\n    train/CrossEntropyLoss=7.417\n[2024-04-18 19:10:41] CRITICAL [olmo.util:158, rank=0] Uncaught OLMoThreadError: generator thread data thread 3 failed",
        # cmusatyalab/openface#361: GraphicsMagick's crash handler in the image-loading threads
        '==> online epoch # 2\nMagick: abort due to signal 11 (SIGSEGV) "Segmentation Fault"...\nAborted',
    ],
)
def test_a_data_pipelines_own_thread_or_decoder_dying_is_a_dataloader_error(text: str) -> None:
    assert reason_of(text) == "dataloader_error"


# allenai/OLMo#886: the worker's HTTP range read could not reach the data server.
_OLMO_UNREACHABLE = """
CRITICAL Uncaught ConnectionError: Caught ConnectionError in DataLoader worker process 0. Original Traceback (most recent call last):
  File "<python_lib_path>/urllib3/connection.py", line 198, in _new_conn
    sock = connection.create_connection(
  File "<python_lib_path>/urllib3/util/connection.py", line 73, in create_connection
    sock.connect(sa)
OSError: [Errno 101] Network is unreachable
"""


def test_a_network_error_reraised_by_a_dataloader_worker_is_the_networks() -> None:
    assert reason_of(_OLMO_UNREACHABLE) == "network_error"
    assert reason_of(_OLMO_UNREACHABLE.splitlines()[1]) == "network_error"


def test_a_decode_error_reraised_by_a_dataloader_worker_stays_a_dataloader_error() -> None:
    line = "PIL.UnidentifiedImageError: Caught UnidentifiedImageError in DataLoader worker process 3."
    assert reason_of(line) == "dataloader_error"


# ---------------------------------------------------------------- files and checkpoints


@pytest.mark.parametrize(
    "line",
    [
        # replicate/flux-fine-tuner#54
        "Error no file named config.json found in directory FLUX.1-dev/transformer.",
        "OSError: Error no file named pytorch_model.bin, tf_model.h5, model.ckpt.index or flax_model.msgpack found in directory ./out.",
        "OSError: ./checkpoints/llama-7b does not appear to have a file named config.json. Checkout 'https://huggingface.co/./checkpoints/llama-7b/None' for available files.",
    ],
)
def test_a_model_directory_without_the_file_a_library_needs_is_a_missing_file(line: str) -> None:
    assert reason_of(f"Training failed.\n{line}") == "file_not_found"


def test_a_checkpoint_of_another_kind_than_the_loader_expects() -> None:
    """NVlabs/LongLive#15: the LoRA stage auto-resumed from stage 1's full-model checkpoint."""
    line = "ValueError: Checkpoint logs/checkpoint_model_000200/model.pt is not a LoRA checkpoint. Found keys: ['generat or', 'critic', 'generator_optimizer', 'critic_optimizer', 'step']"
    assert reason_of(line) == "checkpoint_load_error"


def test_saving_a_checkpoint_is_not_a_checkpoint_of_the_wrong_kind() -> None:
    text = "[INFO] saving checkpoint to out/ckpt-100\nKeyError: 'loss'"
    assert reason_of(text) == "script_error"


# ---------------------------------------------------------------- native checks without their prefix


@pytest.mark.parametrize(
    "text",
    [
        # Lightning-AI/pytorch-lightning#17435: XLA's check on a TPU, over its stack trace
        "Check failed: xla_tpu_programs.size() > 0 (0 vs. 0)\n*** Begin stack trace ***\n    @     0x7ff329f826c6        752  tensorflow::tpu::TpuProgramGroup::Initialize()",
        # huggingface/alignment-handbook#77: a CUDA kernel's assertion as the title keeps it
        "Assertion `srcIndex < srcSelectDimSize` failed.\nTraceback:",
    ],
)
def test_a_native_check_or_assertion_with_no_prefix_is_a_framework_error(text: str) -> None:
    assert reason_of(text) == "framework_error"


def test_a_bare_check_that_names_a_connection_is_left_to_the_network() -> None:
    assert (
        reason_of("Check failed: error >= 0 ERROR connecting to 10.0.0.3:6170: Connection refused") == "network_error"
    )


# ---------------------------------------------------------------- the rank a launcher names

# InternLM/InternLM-XComposer#361: local rank 2 cannot see its GPU; torchrun's line is all that names it.
_XCOMPOSER_ORDINAL = """
Load model from: internlm/internlm-xcomposer2-4khd-7b
RuntimeError: CUDA error: invalid device ordinal
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 6351 closing signal SIGTERM
WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 6352 closing signal SIGTERM
ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 2 (pid: 6353) of binary: /home/user/anaconda3/envs/intern/bin/python
"""


def test_a_launchers_failed_line_names_the_rank_when_no_summary_does() -> None:
    d = diagnose_rules([log_source("torchrun.log", _XCOMPOSER_ORDINAL)])
    assert (d.reason, d.rank) == ("argument_error", 2)


def test_mp_spawns_process_index_names_the_rank() -> None:
    text = 'Traceback (most recent call last):\n  File "/opt/conda/lib/python3.8/site-packages/torch/multiprocessing/spawn.py", line 130, in join\n    raise ProcessExitedException(\ntorch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGKILL'
    d = diagnose_rules([log_source("train.log", text)])
    assert (d.reason, d.rank) == ("host_oom", 1)


def test_a_summarys_root_cause_rank_outranks_the_failed_line() -> None:
    summary = "Root Cause (first observed failure):\n[0]:\n  time      : 2024-09-04_13:55:02\n  host      : s06\n  rank      : 3 (local_rank: 3)\n  exitcode  : -9 (pid: 1754710)\n============================================================"
    text = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 1754707) of binary: /usr/bin/python\n"
        + summary
    )
    assert diagnose_rules([log_source("torchrun.log", text)]).rank == 3


# ---------------------------------------------------------------- second part (cases 808-814)


def test_a_check_in_rays_log_layout_is_a_native_abort() -> None:
    """verl-project/verl#2380: Ray's core worker, behind Ray's '(TaskRunner pid=N)' prefix."""
    text = "(TaskRunner pid=2915798) [2025-07-06 07:14:27,052 C 2915798 2915798] task_receiver.cc:219: Check failed: objects_valid"
    assert reason_of(text) == "framework_error"


@pytest.mark.parametrize(
    "line",
    [
        # mozilla/translations#1015: Marian's wording, CURAND_STATUS_INITIALIZATION_FAILED
        "[2025-01-21 17:10:38] Error: Curand error 203 - /builds/worker/fetches/marian-source/src/tensors/rand.cpp:74: curandCreateGenerator",
        "[2025-01-21 17:10:38] Error: Cublas error 13 - /src/tensors/gpu/prod.cpp:102: cublasSgemm",
    ],
)
def test_a_cuda_librarys_status_as_a_number_is_a_cuda_error(line: str) -> None:
    assert reason_of(line) == "cuda_error"


def test_cublas_allocation_failure_as_a_number_is_not_called_a_fault() -> None:
    assert reason_of("Error: Cublas error 3 - /src/tensors/gpu/prod.cpp:102: cublasCreate") != "cuda_error"


@pytest.mark.parametrize(
    "line",
    [
        # THUDM/slime#1391: the SGLang router in front of the rollout engines
        "httpx.HTTPStatusError: Server error '503 Service Unavailable' for url 'http://26.104.43.34:3938/generate'",
        "requests.exceptions.HTTPError: 502 Server Error: Bad Gateway for url: http://rollout-0:8000/v1/completions",
    ],
)
def test_a_service_the_run_calls_that_is_not_there_is_a_network_error(line: str) -> None:
    assert reason_of(f"step 51 | reward 0.31\n{line}") == "network_error"


def test_an_http_client_error_is_not_a_network_error() -> None:
    line = "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://huggingface.co/api/models/my-org/missing"
    assert reason_of(line) != "network_error"
