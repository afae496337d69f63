"""Classes of misses from issue 19's thirty-fifth round (corpus cases 2142-2152, long-context training and 3D
shape generation: ms-swift's LongLoRA, NeMo and Megatron context parallelism, LION, GET3D, LongLoRA, DiT-3D,
LWM, 360-LLaMA-Factory; 2162-2167, memory-efficient optimizers and PEFT, and audio-language models: GaLore,
Kimi-Audio, schedule-free optimizers, MiniCPM-o, Higgs Audio, PiSSA): an assertion on the parsed command line
quoted without its frames, and a local path the Hub client refuses as a repository id. Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""

# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# modelscope/ms-swift#1588 (case 2142): the raising statement and the exception, no frames.
_ARGS_ASSERT = """
$ CUDA_VISIBLE_DEVICES=0 swift sft --model_type llava1_6-mistral-7b-instruct --sft_type longlora
    assert LongLoRAModelType.LLAMA in args.model_type
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError
"""

# hiyouga/LlamaFactory#6656 (case 2167).
_REPO_ID_PATH = (
    "[rank0]: huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
    "'namespace/repo_name': 'saves/Qwen2.5-14B/full/train_2025-01-15-16-40'. Use `repo_type` argument if needed.\n"
)


def test_an_assertion_on_the_parsed_command_line_is_the_launch_s() -> None:
    assert reason_and_rule(_ARGS_ASSERT) == ("argument_error", "assert-launch-option")
    # the same statement under its frame, in a whole traceback
    statement = _ARGS_ASSERT.split("\n", 2)[2]  # without the command line
    whole = 'Traceback (most recent call last):\n  File "/opt/swift/llm/sft.py", line 80, in llm_sft\n' + statement
    assert reason_and_rule(whole) == ("argument_error", "assert-launch-option")
    # an assertion on something else stays the code's, and a statement after a comma does not count
    assert reason_of(_ARGS_ASSERT.replace("args.model_type", "model.config.model_type")) != "argument_error"
    assert (
        reason_of(_ARGS_ASSERT.replace("LongLoRAModelType.LLAMA in args.model_type", "x > 0, args.msg"))
        != "argument_error"
    )


def test_a_local_path_the_hub_refuses_as_a_repository_id_is_missing() -> None:
    assert reason_and_rule(_REPO_ID_PATH) == ("file_not_found", "hub-repo-id-is-a-path")
    absolute = (
        "huggingface_hub.utils._validators.HFValidationError: Repo id must use alphanumeric chars or '-', '_', '.', "
        "'--' and '..' are forbidden, '-' and '.' cannot start or end the name, max length is 96: '/data/models/llama-7b'."
    )
    assert reason_and_rule(absolute) == ("file_not_found", "hub-repo-id-is-a-path")
    # a malformed id that is no path is the argument's, not a missing file
    bad_id = "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': 'a b'."
    assert reason_of(bad_id) != "file_not_found"


# mosaicml/examples (case 1586), a miss of round 24: Composer's launcher giving up on the ranks meeting.
_BAILING_OUT = "$ composer -n 8 main.py yamls/main/hf-bert-base-uncased.yaml\nRuntimeError: Waiting for local rank 0, bailing out: 60.000 < 60.033 sec.\n"


def test_composer_giving_up_on_the_ranks_meeting_is_the_rendezvous() -> None:
    assert reason_and_rule(_BAILING_OUT) == ("network_error", "connection-reset")
