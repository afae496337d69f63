"""Classes of misses from issue 19's rounds forty-nine to fifty-one (corpus cases 2629-2652: RL-for-LLM reasoning
forks and speech recognition recipes; 2659-2679: visual grounding and image captioning; 2689-2711: small-LM
pretraining and text-embedding fine-tuning), with an older miss (2060). Error messages are verbatim from the public
reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


def test_ray_s_disk_monitor_on_its_session_directory_is_storage() -> None:
    # hiyouga/EasyR1#300 (case 2633)
    text = "/tmp/ray/session_2025-05-19_04-19-55_287964_976346 is over 95% full, available space: 2.03779 GB; capacity: 69.9336 GB. Object creation will fail if spilling is required.\n"
    assert reason_and_rule(text) == ("storage_error", "storage")


@pytest.mark.parametrize(
    "text",
    [
        # k2-fsa/icefall#1850 (case 2640) and #1079 (case 2641)
        "AssertionError: CutSet has cuts with duplicated IDs.\n",
        "AssertionError: Inconsistent number of samples in a MixedCut\n",
    ],
)
def test_lhotse_s_checks_of_a_corpus_s_manifests_are_the_data_s(text: str) -> None:
    assert reason_and_rule(text) == ("dataloader_error", "speech-manifest-check")


def test_a_library_older_than_the_model_s_config_is_the_framework_s() -> None:
    # McGill-NLP/llm2vec#150 (case 2704), microsoft/TransformerCompression (case 2113)
    text = "ValueError: `rope_scaling` must be a dictionary with two fields, `type` and `factor`, got {'factor': 32.0, 'high_freq_factor': 4.0, 'low_freq_factor': 1.0, 'original_max_position_embeddings': 8192, 'rope_type': 'llama3'}\n"
    assert reason_and_rule(text) == ("framework_error", "framework-older-than-config")


def test_a_rust_extension_s_panic_is_the_library_s() -> None:
    # shibing624/text2vec#123 (case 2708)
    assert reason_and_rule("pyo3_runtime.PanicException: no entry found for key\n") == (
        "framework_error",
        "native-extension-panic",
    )


@pytest.mark.parametrize(
    "text",
    [
        # espnet/espnet#6044 (case 2647) and karpathy/llm.c#492 (case 2693)
        "(asr.sh:306:main) Error: --train_set is required\n",
        "MPI support is disabled. Please enable MPI support to use MPI-based NCCL-init method.\n",
    ],
)
def test_a_recipe_s_required_option_and_a_launch_the_build_cannot_do_are_the_command_line(text: str) -> None:
    assert reason_and_rule(text) == ("argument_error", "recipe-option-required")


def test_a_dataset_file_not_in_its_encoding_is_the_data_s() -> None:
    # jingyaogong/minimind#350 (case 2697)
    text = """
Traceback (most recent call last):
  File "/mnt/workspace/minimind/model/dataset.py", line 26, in load_data
    for line_num, line in enumerate(f, 1):
  File "<frozen codecs>", line 322, in decode
UnicodeDecodeError: 'utf-8' codec can't decode bytes in position 0-1: unexpected end of data
"""
    assert reason_and_rule(text) == ("dataloader_error", "dataset-decode")
    # a config read in another locale stays the script's
    config = text.replace("/mnt/workspace/minimind/model/dataset.py", "/mnt/workspace/minimind/train.py").replace(
        "load_data", "read_config"
    )
    assert reason_of(config) == "script_error"


def test_a_launch_script_with_windows_line_endings_is_the_command_line() -> None:
    # OFA-Sys/OFA#148 (case 2662): the shell's "not found" printed over each line's start
    text = "    raise RuntimeError()\nRuntimeError\n: not foundon_stage2.sh: 46: train_caption_stage2.sh: --selected-cols=1,4,2\n: not foundon_stage2.sh: 47: train_caption_stage2.sh: --bpe-dir=../../utils/BPE\n"
    assert reason_and_rule(text) == ("argument_error", "script-crlf-line-endings")
    assert reason_and_rule("train.sh: line 3: $'\\r': command not found\n") == (
        "argument_error",
        "script-crlf-line-endings",
    )
    # a plain missing command stays a missing file
    assert reason_of("train.sh: 12: torchrun: not found\n") == "file_not_found"


def test_numpy_s_words_quoted_by_a_logger_are_the_caller_s() -> None:
    # evilsocket/pwnagotchi (case 2060, an older miss)
    text = "16:59:10 [ERROR] [ai] error while training (could not broadcast input array from shape (428,) into shape (1,503))\n"
    assert reason_and_rule(text) == ("script_error", "emitter-native-numpy-value-unnamed")


def test_a_key_that_is_a_torch_dtype_is_a_framework_s_table() -> None:
    # karpathy/llama2.c#53 (case 2694)
    assert reason_and_rule("KeyError: torch.complex64\n") == ("framework_error", "dtype-table-lookup")
    assert reason_of("KeyError: 'labels'\n") == "script_error"


def test_rllm_and_colbert_are_frameworks() -> None:
    # rllm-org/rllm#217 (case 2635) and AnswerDotAI/RAGatouille#244 (case 2702)
    rllm = 'Traceback (most recent call last):\n  File "/exp/agenticrl/rllm/rllm/router/router.py", line 48, in poll_completions_openai\n    raise Exception(f"API request failed with status {response.status}: {error_text}")\nException: API request failed with status 500: Internal Server Error\n'
    assert reason_of(rllm) == "framework_error"
    colbert = "Traceback (most recent call last):\n  File \"/home/luffy/.local/lib/python3.10/site-packages/colbert/training/training.py\", line 146, in train\n    ckpt_path = manage_checkpoints(config, colbert, optimizer, batch_idx+1, savepath=None, consumed_all_triples=True)\nUnboundLocalError: local variable 'batch_idx' referenced before assignment\n"
    assert reason_of(colbert) == "framework_error"
