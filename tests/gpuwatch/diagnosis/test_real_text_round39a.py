"""Classes of misses from issue 19's thirty-ninth round (corpus cases 2318-2335, the pipelines that prepare
pretraining data: text-dedup, datatrove, litdata, data-juicer, RedPajama, Megatron's preprocessing, nanotron,
NeMo-Curator, cc_net; 2342-2358, machine translation training: Marian, fairseq's NLLB, IndicTrans2, OpusTrainer,
OPUS-MT, OPUS-CAT, the Firefox translations pipeline), with two older misses (2251, 1620): Marian's own words for
its options, its GPU memory and a model of another shape; a dataset's file said missing by its reader; a
data-pipeline framework's own exception; an attribute sentence whose closing quote was lost; a controller's
bracketed assertion. Error messages are verbatim from the public reports named in each test; hosts, paths and
pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# marian-nmt/marian#120 (case 2343).
_MARIAN_OOM = """
[2017-10-19 22:35:21] [memory] Extending reserved space to 95232 MB (device 0)
terminate called after throwing an instance of 'util::Exception'
  what():  marian-dev/src/kernels/cuda_helpers.h:13 in void gpuAssert(cudaError_t, const char*, int, bool) threw util::Exception.
GPUassert: out of memory marian-dev/src/tensors/device_gpu.cu 32
Aborted (core dumped)
"""

# Helsinki-NLP/OPUS-MT-train#47 (case 2356).
_MARIAN_SHAPE = "[2021-01-28 17:03:35] Error: Requested shape shape=1x32000 size=32000 for existing parameter 'decoder_ff_logit_out_b' does not match original shape shape=1x58100 size=58100\n"

# Helsinki-NLP/OPUS-CAT#103 (case 2357) and marian-nmt/marian#411 (case 2342).
_MARIAN_OPTIONS = [
    "2024-08-24 21:56:03.044 +02:00 [INF] [2024-08-24 21:56:03] Error: Cannot convert values for the option: log\n",
    "[2023-04-18 02:00:09] Error: Not implemented\n[2023-04-18 02:00:09] Error: Aborted from static To marian::fastopt_helpers::Convert<To, std::__cxx11::basic_string<char> >::apply(const string&) [with To = int; std::string = std::__cxx11::basic_string<char>] in /home/ogaith/git/marian/src/common/fastopt.cpp:27\n",
]

# togethercomputer/RedPajama-Data#94 (case 2324), NVIDIA/Megatron-LM#119 (case 2335), mozilla/translations#1181 (case 2355).
_MISSING_DATA = [
    "An error occurred while processing the 'common_crawl' configuration: Couldn't find file at https://data.together.xyz/redpajama-data-v2/v1.0.0/quality_signals/2023-14/0000/en_tail.signals.json.gz\n",
    "Dataset does not exist: /data/openwebtext/subset-01\nTraceback (most recent call last):\n  File \"/mega/Megatron-LM/megatron/data/gpt_dataset.py\", line 134, in get_indexed_dataset_\n    indexed_dataset.sizes.shape[0]))\nAttributeError: 'NoneType' object has no attribute 'sizes'\n",
    "Downloading https://firefox-ci-tc.services.mozilla.com/api/queue/v1/task/BAvLUilqQ3SYqy6Ck55CUQ/artifacts/public/build/vocab.en.spm\nDownload failed: HTTP Error 404: Not Found\nsleeping for 59.00s (attempt 1/5)\n",
]

# facebookresearch/cc_net#36 (case 2333): cc_net run from its checkout.
_CC_NET = """
Traceback (most recent call last):
  File "/home/u/raphael/cc_net/cc_net/mine.py", line 341, in mine
    ex(_mine_shard, repeat(conf), hashes_files, *_transpose(missing_outputs))
  File "/home/u/raphael/cc_net/cc_net/execution.py", line 200, in custom_map_array
    raise Exception(message)
Exception: 9 / 9 jobs failed while running _mine_shard
"""

# salesforce/CodeT5#155 (case 2251): the report's title, its closing quote lost.
_ATTRIBUTE_TITLE = "'T5Stack' object has no attribute 'first_device\n"

# skypilot-org/skypilot (case 1620, a miss of round 21).
_SKYPILOT = "Job 68 is already in terminal state FAILED_CONTROLLER.\nFailure reason: Unexpected error occurred: [AssertionError] JobStatus.FAILED_DRIVER\n"


def test_marian_out_of_gpu_memory_is_an_oom() -> None:
    assert reason_and_rule(_MARIAN_OOM) == ("gpu_oom", "cuda-oom")


def test_marian_continuing_from_a_model_of_another_shape_is_the_checkpoint() -> None:
    assert reason_and_rule(_MARIAN_SHAPE) == ("checkpoint_load_error", "state-dict")


@pytest.mark.parametrize("text", _MARIAN_OPTIONS)
def test_marian_refusing_an_option_s_value_is_the_command_line(text: str) -> None:
    assert reason_and_rule(text) == ("argument_error", "cli-parser-refusal")


@pytest.mark.parametrize("text", _MISSING_DATA)
def test_a_dataset_s_file_said_missing_by_its_reader(text: str) -> None:
    assert reason_and_rule(text) == ("file_not_found", "file-not-found-in-message")


def test_a_data_pipeline_framework_s_own_exception_is_the_framework_s() -> None:
    assert reason_of(_CC_NET) == "framework_error"


def test_python_s_attribute_sentence_with_its_closing_quote_lost() -> None:
    assert reason_and_rule(_ATTRIBUTE_TITLE) == ("script_error", "emitter-native-python-attribute-unnamed")
    # a module's missing attribute stays out of the section, as before (a library's version, not settled)
    assert reason_of("module 'comfy.samplers' has no attribute 'calculate_sigmas_scheduler'\n") == "unknown"


def test_a_controller_s_own_bracketed_assertion_is_the_platform_s() -> None:
    assert reason_and_rule(_SKYPILOT) == ("framework_error", "controller-bracketed-exception")
    # the job's own error in the same format is not the controller's assertion
    assert reason_of("Failure reason: Unexpected error occurred: [ValueError] bad config\n") != "framework_error"


# polyaxon/polyaxon (case 1631, a miss of round 21): the whole traceback on one line, as the report pasted it.
_ONE_LINE = (
    'Traceback (most recent call last): File "/polyaxon/polyaxon/scheduler/experiment_scheduler.py", line 493, in start_experiment '
    'use_sidecar=True) File "/polyaxon/polyaxon/scheduler/spawners/tensorflow_spawner.py", line 108, in create_job_uuids '
    "uuid.uuid4().hex for _ in self.get_n_pods(task_type=TaskType.WORKER)] TypeError: 'int' object is not iterable\n"
)


def test_a_traceback_on_one_line_is_read_as_one() -> None:
    assert reason_and_rule(_ONE_LINE) == ("framework_error", "exception-TypeError")
    # the same with its line breaks escaped, as a JSON log keeps it, and raised in the script's own file
    escaped = (
        '{"level": "error", "msg": "Traceback (most recent call last):\\n  File \\"/app/train.py\\", line 12, in <module>\\n'
        "    main()\\nKeyError: 'labels'\"}\n"
    )
    assert reason_and_rule(escaped) == ("script_error", "exception-KeyError")
    # the message still goes through the rules
    oom = 'Traceback (most recent call last): File "/app/train.py", line 3, in <module> loss.backward() torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n'
    assert reason_of(oom) == "gpu_oom"
