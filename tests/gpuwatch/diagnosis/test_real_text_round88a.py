"""Classes of misses from issue 19's rounds eighty-eight to ninety (corpus cases 3801-3822, 3831-3852 and 3861-3881:
reports from vision stacks, LLM post-training and diffusion training taken as the search returned them). Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # bghira/SimpleTuner#550 and #859 (cases 3868, 3869): the VAE cache missing images the collate step wants
        (
            "Exception: (id=sanna-marin-sd3) Some images were not correctly cached during the VAE Cache operations. Ensure --skip_file_discovery=vae is not set.\nProblematic images: ['/data/sanna_marin/1.jpg']\n",
            "dataloader_error",
            "image-cache-incomplete",
        ),
        # unslothai/unsloth#2974 (case 3852): accelerate's batch-size search halved down to nothing
        ("RuntimeError: No executable batch size found, reached zero.\n", "gpu_oom", "auto-batch-size-exhausted"),
        # ostris/ai-toolkit#92 (case 3878): diffusers without the PEFT package it needs
        (
            '    raise ValueError("PEFT backend is required for this method.")\nValueError: PEFT backend is required for this method.\n',
            "import_error",
            "package-install-required",
        ),
        # open-mmlab/mmsegmentation#2139 (case 3806): the package index's placeholder installed for the real package
        (
            "  File \"/root/miniconda3/lib/python3.8/site-packages/mmengine/__init__.py\", line 1, in <module>\n    raise NotImplementedError('This is a project in development')\nNotImplementedError: This is a project in development\n",
            "import_error",
            "placeholder-package",
        ),
        # unslothai/unsloth#747 (case 3841): xformers built without the operator the attention needs
        (
            "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n     query       : shape=(2, 512, 8, 4, 128) (torch.bfloat16)\n`cutlassF` is not supported because:\n    operator wasn't built - see `python -m xformers.info` for more info\n",
            "import_error",
            "dynamic-loader",
        ),
        # huggingface/trl#2826 (case 3848): vLLM's device asked of a machine with one GPU
        (
            "ValueError: The requested device for vllm (cuda:1) is not available. You are likely using vLLM without restricting the number of GPUs for training. Set the `--num_processes` argument to a value lower than the number of GPUs available on your machine\n",
            "argument_error",
            "launch-gpu-setup",
        ),
    ],
)
def test_trainers_in_their_own_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_openmmlabs_toolbox_run_from_its_own_checkout_is_the_framework() -> None:
    # open-mmlab/mmsegmentation#3314 (case 3807): a bare assertion in mmseg's slide inference, from a checkout
    text = """Traceback (most recent call last):
  File "tools/train.py", line 104, in <module>
    main()
  File "/hdd2/jwc/mmsegmentation/mmseg/models/segmentors/encoder_decoder.py", line 288, in slide_inference
    assert (count_mat == 0).sum() == 0
AssertionError
"""
    assert reason_of(text) == "framework_error"


def test_another_projects_copy_of_an_openmmlab_package_stays_its_own() -> None:
    # the guard: a project vendoring mmseg under its own name is that project's code, as a fork's pcdet is
    text = """Traceback (most recent call last):
  File "/home/u/SegNeXt/mmseg/models/segmentors/encoder_decoder.py", line 288, in slide_inference
    assert (count_mat == 0).sum() == 0
AssertionError
"""
    assert reason_of(text) == "script_error"
