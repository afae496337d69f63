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


# ---------------------------------------------------------------- jax's check that jaxlib fits it

# marin-community/levanter#668 (case 1597): Levanter's train_lm.py on an RTX 3060 after reinstalling jax.
_LEVANTER_JAXLIB_NEWER = r"""
$ python src/levanter/main/train_lm.py --config_path config/gpt2_small.yaml
RuntimeError: jaxlib version 0.4.30 is newer than and incompatible with jax version 0.4.6. Please update your jax and/or jaxlib packages.
"""


def test_jaxlib_newer_than_jax_is_an_installation_problem() -> None:
    assert reason_and_rule(_LEVANTER_JAXLIB_NEWER) == ("import_error", "jaxlib-version-mismatch")


def test_jax_s_older_wording_of_the_same_check() -> None:
    # the same thread, the same check as older jax words it (jax/_src/lib/__init__.py)
    assert (
        reason_of("RuntimeError: jaxlib is version 0.1.55, but this version of jax requires version 0.1.69.")
        == "import_error"
    )


def test_jax_s_other_runtime_errors_are_not_a_version_mismatch() -> None:
    # jax's distributed start-up refusing the order of calls stays a framework's RuntimeError
    assert (
        reason_of("RuntimeError: jax.distributed.initialize() must be called before any JAX computations are executed.")
        == "framework_error"
    )
