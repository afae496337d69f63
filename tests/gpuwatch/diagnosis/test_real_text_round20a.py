"""Classes of misses from issue 19's twentieth round (corpus cases 1580-1597: LLM pretraining, fine-tuning and RL
post-training stacks other than Megatron-LM and DeepSpeed: torchtitan, torchtune, MaxText, Levanter, llm-foundry and
Composer, Liger-Kernel, NeMo-RL, InternEvo, open-r1, ROLL, Tina): click's usage errors (a CLI that refuses its
command line), jax's check that jaxlib fits it, triton's JIT launcher failing on its own cache key, and a bus error
that only the shell or a launcher reports. Error messages are verbatim from the public reports named in each test;
hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- click's usage errors

# meta-pytorch/torchtune#2001 (case 1595): another package's `tune` had replaced torchtune's.
_TORCHTUNE_NO_SUCH_COMMAND = r"""
(torchtune) aginart@ip-10-1-78-193:~/dev/fun_projects/generation_projects$ tune run --nproc_per_node 8 full_finetune_distributed --config torchtune/recipes/configs/qwen2_5/1_5B_full.yaml
Usage: tune [OPTIONS] COMMAND [ARGS]...
Try 'tune --help' for help.

Error: No such command 'run'.
"""


def test_click_s_no_such_command_is_a_refused_command_line() -> None:
    assert reason_and_rule(_TORCHTUNE_NO_SUCH_COMMAND) == ("argument_error", "click-usage-error")


def test_click_s_other_usage_errors_read_the_same() -> None:
    assert (
        reason_of("Usage: train [OPTIONS] CONFIG\nTry 'train --help' for help.\n\nError: Missing argument 'CONFIG'.")
        == "argument_error"
    )
    assert reason_of("Error: No such option: --nproc-per-node") == "argument_error"
    assert reason_of("Error: Got unexpected extra argument (full_finetune.py)") == "argument_error"


def test_prose_and_the_shell_s_missing_command_are_not_click_s() -> None:
    # a sentence that says it is not click's (no quote, no colon after the words)
    assert reason_of("There is no such command in this image, see the docs") == "unknown"
    # bash's own words stay the shell's missing program
    assert reason_of("bash: tune: command not found") == "file_not_found"
    # the interpreter's missing recipe file (meta-pytorch/torchtune#350, case 1596) is unchanged
    assert (
        reason_of(
            "ERROR: /home/jrcummings/.conda/envs/torchtune-test/bin/python: can't open file '/home/jrcummings/projects/torchtune/full_finetune.py': [Errno 2] No such file or directory"
        )
        == "file_not_found"
    )
