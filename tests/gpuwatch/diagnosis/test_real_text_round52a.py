"""Classes of misses from issue 19's rounds fifty-two to fifty-four (corpus cases 2719-2736: protein language and
generative models, single-cell foundation models; 2749-2771: image restoration and inpainting; 2779-2805: robot-
learning simulators' RL and multi-agent RL), with an older miss (1820). Error messages are verbatim from the
public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


@pytest.mark.parametrize(
    "text",
    [
        # facebookresearch/BenchMARL#229 (case 2796) and #209 (case 2797)
        "omegaconf.errors.MissingMandatoryValue: Structured config of type `ExperimentConfig` has missing mandatory value: evaluation_static\n    full_key: experiment.evaluation_static\n",
        "In 'experiment/base_experiment': ConfigKeyError raised while composing config:\nKey 'wandb_extra_kwargs' not in 'ExperimentConfig'\n    full_key: experiment.wandb_extra_kwargs\n",
    ],
)
def test_a_structured_config_s_missing_value_and_a_key_refused_while_composing_are_the_options(text: str) -> None:
    assert reason_and_rule(text) == ("argument_error", "hydra-override-refused")


def test_the_run_s_code_asking_a_config_for_a_key_stays_the_script_s() -> None:
    # case 1436's kind: the code, not the composition, asks
    text = "Traceback (most recent call last):\n  File \"train.py\", line 40, in main\n    lr = cfg.opt.lr_scheduler\nomegaconf.errors.ConfigAttributeError: Key 'lr_scheduler' is not in struct\n"
    assert reason_of(text) == "script_error"


def test_an_l1_loss_logged_as_nan() -> None:
    # SayedNadim/Global-and-Local-Attention-Based-Free-Form-Image-Inpainting#11 (case 2769)
    text = "2020-08-09 11:33:50,187 INFO Iter: [2/500000] l1: nan g: nan d: 0.920272 speed: 2.68 batches/s\n"
    assert reason_and_rule(text) == ("loss_divergence", "loss-nan")


def test_gymnasium_s_own_bug_is_the_framework_s() -> None:
    # ShaneFlandermeyer/bmpc-jax#1 (case 2787)
    text = 'Traceback (most recent call last):\n  File "/home/u/Code/bmpc-jax/bmpc_jax/train.py", line 74, in train\n    env = vector_env_cls(\n  File "/home/u/miniconda3/envs/bmpc-jax/lib/python3.9/site-packages/gymnasium/vector/async_vector_env.py", line 158, in __init__\n    self.metadata["autoreset_mode"] = self.autoreset_mode\nTypeError: \'NoneType\' object does not support item assignment\n'
    assert reason_of(text) == "framework_error"


@pytest.mark.parametrize(
    "text",
    [
        # meta-llama/llama-recipes (case 1820) and open-mmlab/mmagic#671 (case 2759)
        "ValueError: Cannot flatten integer dtype tensors\n",
        "ValueError: You may use too small dataset and our distributed sampler cannot pad your dataset correctly. We highly recommend you to use fewer GPUs to finish your work\n",
    ],
)
def test_what_a_framework_cannot_do_in_its_own_words_is_the_framework_s(text: str) -> None:
    assert reason_and_rule(text) == ("framework_error", "framework-own-limit")
