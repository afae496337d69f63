"""Classes of misses from issue 19's rounds ninety-four to ninety-six (corpus cases 4001-4022, 4031-4054 and
4061-4082: reports from LLM training code, research repositories and distributed training libraries taken as the search
returned them). Error messages are verbatim from the public reports named in each test; hosts, paths and pids may be
made up."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # EleutherAI/gpt-neox#482 (case 4005): fp16 overflow that never recovers, in GPT-NeoX's words
        (
            "Exception: Skipped 50 iterations in a row due to Overflow - Exiting training.\n",
            "loss_divergence",
            "overflow-iterations-in-a-row",
        ),
        # openai/baselines#480 (case 4048): MpiAdam's sync check seeing only NaN
        (
            "AssertionError: (array([nan, nan, nan, ..., nan, nan, nan], dtype=float32), array([nan, nan, nan, ..., nan, nan, nan], dtype=float32))\n",
            "loss_divergence",
            "assertion-on-nan-arrays",
        ),
        # EleutherAI/gpt-neox#757 (case 4019): parallel sizes the GPU count does not divide
        (
            "AssertionError: NeoXArgs.calculate_derived() (global_num_gpus / pp_size) / mp_size [(4 / 4) / 2] must be a whole number\n",
            "argument_error",
            "parallel-sizes-not-whole",
        ),
        # opendilab/LightZero#214 (case 4067): DI-engine without a rank from a launcher
        ("RuntimeError: please indicate rank explicitly in dist_init method\n", "argument_error", "rank-not-given"),
        # Lightning-AI/pytorch-lightning#18728 (case 4075): Lightning refusing to fork after CUDA was initialised
        (
            "RuntimeError: Lightning can’t create new processes if CUDA is already initialized. Did you manually call torch.cuda.* functions, have moved the model to the device, or allocated memory on the GPU any other way?\n",
            "argument_error",
            "launch-gpu-setup",
        ),
        # NVlabs/stylegan3#49 (case 4047): a run-time extension that does not build
        (
            "LINK : fatal error LNK1104: cannot open file 'bias_act_plugin.pyd'\nninja: build stopped: subcommand failed.\n",
            "import_error",
            "extension-build-failed",
        ),
    ],
)
def test_runs_refused_or_diverged_in_their_frameworks_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # Lightning-AI/pytorch-lightning#19096 (case 4081): ZeRO-3's ranks fetching different parameters
        (
            "  ...\nRuntimeError: disagreement between rank0 and rank2: rank0: [-4866073977605047075, -4957833660337767236] rank2: [2, 3, 4, 6]\n",
            "framework_error",
            "zero3-rank-disagreement",
        ),
        # EleutherAI/lm-evaluation-harness#1003 (case 4082): a sharded parameter read before it was gathered
        (
            "  ...\nRuntimeError: The tensor has a non-zero number of elements, but its data is not allocated yet. Caffe2 uses a lazy allocation, so you will need to call mutable_data() or raw_mutable_data() to actually allocate memory.\n",
            "framework_error",
            "lazy-allocation-unallocated",
        ),
        # Lightning-AI/lightning-thunder#1942 (case 4080): DeepSpeed's directory checkpoint loaded as a file
        (
            "    trainer.predict(model, datamodule=dm, ckpt_path=args.ckpt_path)\n  ...\nIsADirectoryError: [Errno 21] Is a directory: '/data/runs/seg_v3/checkpoints/last.ckpt'\n",
            "checkpoint_load_error",
            "checkpoint-is-a-directory",
        ),
    ],
)
def test_sharded_training_in_its_own_words(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_message_glued_between_two_progress_bars_is_read() -> None:
    # huggingface/transformers#12771 (case 4003): XLA's glog check written between an epoch bar and a step bar
    line = "Epoch ... (1/10):   0%|                                        | 0/10 [00:00<?, ?it/s]F0717 16:08:46.411695   76098 array.h:414] Check failed: n < sizes_size                                        | 0/118844 [00:00<?, ?it/s]"
    assert normalize(line) == ("F0717 16:08:46.411695   76098 array.h:414] Check failed: n < sizes_size", None)
    assert reason_and_rule(line + "\n")[0] == "framework_error"


def test_two_bars_with_nothing_between_them_stay_empty_and_a_bars_postfix_is_still_read() -> None:
    # the guards: nested bars alone say nothing; one bar with nothing glued after it reads as its postfix
    assert normalize("  0%|          | 0/10 [00:00<?, ?it/s]  0%|          | 0/118844 [00:00<?, ?it/s]") == ("", None)
    assert normalize("Epoch 3:  41%|████      | 2011/4900 [31:12<44:50,  1.07it/s, loss=0.611]") == ("loss=0.611", None)
