"""Classes of misses from issue 19's rounds two hundred and eight to two hundred and eleven (corpus cases 6860-6925:
torch.compile and Inductor; FP8 and mixed precision; FSDP2, DTensor and tensor parallel; torchrun elastic and rendezvous;
reports found by generic queries that show a printed line, taken as the search returned them). Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule"),
    [
        # microsoft/dion#23 (case 6860): TorchDynamo's recompile limit with fullgraph.
        (
            "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations can degrade performance due to the compilation overhead of each recompilation. To monitor recompilations, enable TORCH_LOGS=recompiles. If recompilations are expected, consider increasing torch._dynamo.config.cache_size_limit to an appropriate value.\n",
            "framework_error",
            "framework-own-limit",
        ),
        # Nerogar/OneTrainer#1510 (case 6865): the same limit in Dynamo's other words.
        ("torch._dynamo.exc.Unsupported: Dynamo recompile limit exceeded\n", "framework_error", "framework-own-limit"),
        # Linaqruf/kohya-trainer#246 (case 6880): a precision the device cannot do.
        (
            "bf16 mixed precision requires PyTorch >= 1.10 and a supported device.\n",
            "argument_error",
            "precision-not-on-device",
        ),
        # marian-nmt/marian-dev#699 (case 6883): Marian's cost gone to NaN.
        (
            "[2020-09-05 20:22:24] Ep. 1 : Up. 200 : Sen. 86,994 : Cost 211.39459229 : Time 20.37s : 3498.78 words/s : gNorm 35733.1837\n[2020-09-05 20:22:42] Ep. 1 : Up. 300 : Sen. 137,255 : Cost nan : Time 17.18s : nan words/s : gNorm 41172.8250\n",
            "loss_divergence",
            "loss-nan",
        ),
        # EleutherAI/gpt-neox#991 (case 6885): DeepSpeed's bf16 optimizer.
        (
            "AttributeError: 'BF16_Optimizer' object has no attribute 'fp16_groups'\n",
            "framework_error",
            "deepspeed-object-attribute",
        ),
        # pytorch/torchtitan#441 (case 6906): torch saying a feature is not there yet.
        (
            "  NotImplementedError: 2D state_dict is under development. Please check https://github.com/pytorch/pytorch/issues/129627 for more details.\n",
            "framework_error",
            "framework-own-limit",
        ),
        # pytorch/torchtitan#2184 (case 6902): Python 3.13's whole statement under a frame, its header cut.
        (
            '    File "/home/user/torchtitan/torchtitan/train.py", line 256, in __init__\n      model = self.train_spec.parallelize_fn(model, parallel_dims, job_config)\n    File "/home/user/torchtitan/torchtitan/models/llama4/infra/parallelize.py", line 138, in parallelize_llama\n      tp_mesh = parallel_dims.get_mesh("tp")\n    File "/home/user/torchtitan/torchtitan/distributed/parallel_dims.py", line 273, in get_mesh\n      raise ValueError(\n      ...<2 lines>...\n      )\n  ValueError: Mesh \'tp\' is not available. Ensure the corresponding parallelism dimension is enabled (size > 1).\n',
            "framework_error",
            "exception-ValueError",
        ),
    ],
)
def test_round208_class(text: str, reason: str, rule: str) -> None:
    assert reason_and_rule(text) == (reason, rule)


def test_a_recompile_warning_alone_is_no_failure() -> None:
    text = "W0110 12:27:06.332000 158 torch/_dynamo/convert_frame.py:1551] [2/8] torch._dynamo hit config.recompile_limit (8)\n"
    assert reason_and_rule(text) == ("unknown", None)


def test_a_closing_bracket_after_the_exception_is_not_part_of_the_traceback() -> None:
    """The bracket is read as the frame's statement only between the frame and its exception, not after it."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 3, in <module>\n'
        "    run(\n"
        "    ...<2 lines>...\n"
        "    )\n"
        "KeyError: 'lr'\n"
    )
    assert reason_and_rule(text) == ("script_error", "exception-KeyError")
