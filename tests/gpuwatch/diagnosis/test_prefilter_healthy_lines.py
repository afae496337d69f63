"""The keywords are the prefilter that keeps the no-match path fast: a keyword that occurs on the lines a healthy run
prints at every step sends each of them through the patterns. A `grad_norm` keyword (rounds 109-113) made 200,000 Hugging
Face Trainer metric lines take 5.2 s instead of 0.023 s; these lines, as the trainers print them, must pass unmatched."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from gpuwatch.diagnosis.rules import RuleSet, load_rules

_HEALTHY = [
    # Hugging Face Trainer's logged metrics
    "{'loss': 1.2345, 'grad_norm': 0.5312, 'learning_rate': 1e-05, 'epoch': 0.12}",
    "{'train_runtime': 812.3, 'train_samples_per_second': 31.5, 'train_steps_per_second': 0.98, 'train_loss': 1.02, 'epoch': 3.0}",
    # Megatron-LM and GPT-NeoX iteration lines (without Megatron's "number of nan iterations" field, which loss-nan's
    # "nan" keyword sends to the patterns: an older cost, left as it is)
    " iteration      120/  500000 | consumed samples:        61440 | elapsed time per iteration (ms): 1203.4 | learning rate: 3.000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 65536.0 | grad norm: 0.412 | number of skipped iterations:   0 |",
    # DeepSpeed's step line
    "[2024-05-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=120, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]",
    # Lightning's progress bar with its postfix
    "Epoch 3:  41%|████      | 2011/4900 [31:12<44:50,  1.07it/s, loss=0.611, v_num=3, train_loss_step=0.598]",
    # TRL's GRPO metrics
    "{'loss': 0.0123, 'grad_norm': 0.21, 'learning_rate': 9.5e-07, 'rewards/accuracy_reward': 0.5, 'reward': 0.5, 'reward_std': 0.41, 'completion_length': 212.3, 'kl': 0.0012, 'epoch': 0.05}",
]


@pytest.mark.parametrize("line", _HEALTHY)
def test_a_healthy_step_line_passes_the_prefilter(line: str) -> None:
    assert not RuleSet(load_rules()).prefilter(line), line
