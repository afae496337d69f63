"""Classes of misses from issue 19's thirty-eighth round (corpus cases 2270-2274, GUI and computer-use agent
training: CogAgent/CogVLM fine-tuning, Digi-Q, DigiRL; 2294-2300, segment-anything fine-tuning and open-
vocabulary detection: SAM-Adapter, mmdet's Grounding DINO, Medical-SAM, lightning-sam, transformers' Grounding
DINO): cuDNN finding no engine, accelerate's debug check of a collective's shapes, and VS Code's debugger's
account of an exception. Error messages are verbatim from the public reports named in each test; hosts, paths
and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# zai-org/CogVLM#409 (case 2274): two ranks' tracebacks interleaved.
_NO_ENGINE = """
  File "finetune_cogvlm_demo.py", line 205, in forward_step
    logits = model(**data_b)[0]
Traceback (most recent call last):
    return forward_call(*args, **kwargs)
  File "finetune_cogvlm_demo.py", line 256, in <module>
RuntimeError: FIND was unable to find an engine to execute this computation
"""

# DigiRL-agent/digirl#42 (case 2273).
_ACCELERATE_SHAPES = """
Operation: `accelerate.utils.operations.broadcast`
Input shapes:
    Process 0: [1]
    Process 1: [8]
Error in environment reset
"""

# huggingface/transformers#31434 (case 2300).
_DEBUGPY = """
Exception has occurred: RuntimeError       (note: full exception trace is shown but execution is paused at: _run_module_as_main)
split_with_sizes expects split_sizes to sum exactly to 2700 (input tensor's size at dimension -1), but got split_sizes=[3]
  File "/home/nitay/.local/lib/python3.10/site-packages/torch/_tensor.py", line 921, in split
    return torch._VF.split_with_sizes(self, split_size, dim)
  File "/home/nitay/.local/lib/python3.10/site-packages/transformers/models/grounding_dino/modeling_grounding_dino.py", line 2723, in forward
    indices = [linear_sum_assignment(c[i]) for i, c in enumerate(cost_matrix.split(sizes, -1))]
"""


def test_cudnn_finding_no_engine_is_the_framework_s() -> None:
    assert reason_and_rule(_NO_ENGINE) == ("framework_error", "cudnn-no-engine")


def test_accelerate_s_check_of_a_collective_s_shapes_is_the_run_s() -> None:
    assert reason_and_rule(_ACCELERATE_SHAPES) == ("script_error", "accelerate-operation-mismatch")


def test_vs_code_s_debugger_report_is_read_as_a_traceback() -> None:
    assert reason_and_rule(_DEBUGPY) == ("framework_error", "exception-RuntimeError")
    # innermost frame the script's own: the script's
    own = _DEBUGPY.replace("/home/nitay/.local/lib/python3.10/site-packages/torch/_tensor.py", "/home/nitay/train.py")
    assert reason_of(own) == "script_error"
    # the message still goes through the rules
    oom = "Exception has occurred: OutOfMemoryError\nCUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert reason_of(oom) == "gpu_oom"
