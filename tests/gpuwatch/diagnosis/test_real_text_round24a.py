"""Classes of misses from issue 19's twenty-fourth round (corpus cases 1731-1752: vision-language and multimodal
model training and serving repositories: MoE-LLaVA, DeepSeek-VL2, LLaMA-Adapter, LLaMA-VID, OpenVLA-OFT, LISA,
Monkey, mPLUG-DocOwl, VisualGLM-6B, Ovis, PixelLM, R1-V, Visual-RFT, Aria, SEED, LongVA, VITA, Vary, VideoLLaMA2):
autograd's in-place check on a leaf that requires grad ("a view of a leaf Variable that requires grad is being used
in an in-place operation."), the same family as its version check, a framework error by the message whatever frame
raised it; and a weights loader that finds a checkpoint parameter the model class does not have, in an inference
engine's words rather than torch's state_dict sentence (vLLM's "There is no module or parameter named '...' in
...", MLX's "Received N parameters not in model:"). Error messages are verbatim from the public reports named in
each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- autograd's in-place check on a leaf

# Yuliang-Liu/Monkey#153 (case 1737): LoRA on Monkey's ViT; the model's forward writes the image features into
# hidden_states in place.
_MONKEY_LEAF_INPLACE = r"""
  File "Monkey-main/monkey_model/modeling_qwen.py", line 816, in forward
  hidden_states[i][a + 1 : b] = images[idx]
RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.
"""


def test_a_view_of_a_leaf_used_in_place_is_autograd_s_check() -> None:
    assert reason_and_rule(_MONKEY_LEAF_INPLACE) == ("framework_error", "autograd-inplace")


def test_the_leaf_itself_used_in_place_reads_the_same() -> None:
    # torch's sentence for the leaf rather than a view of it
    assert (
        reason_of("RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.")
        == "framework_error"
    )


def test_advice_about_leaves_is_not_the_check() -> None:
    assert (
        reason_of(
            "Tip: avoid using a leaf variable that requires grad in in-place updates; wrap them in torch.no_grad()"
        )
        == "unknown"
    )
    assert reason_of("Note: requires_grad is set on every leaf Variable of the adapter") == "unknown"


# ---------------------------------------------------------------- a weights file with parameters the model lacks

# rhymes-ai/Aria#99 (case 1746): Aria served with vLLM 0.6.6.post1; the worker's model loader, then the
# report's title.
_ARIA_VLLM = r"""
(VllmWorkerProcess pid=9459) ERROR 01-23 16:15:48 multiproc_worker_utils.py:236]   File "/opt/conda/envs/pytorch/lib/python3.11/site-packages/vllm/model_executor/model_loader/__init__.py", line 12, in get_model
(VllmWorkerProcess pid=9459) ERROR 01-23 16:15:48 multiproc_worker_utils.py:236]     return loader.load_model(vllm_config=vllm_config)
There is no module or parameter named 'multi_modal_projector.cross_attn.layer_norm_kv' in AriaForConditionalGeneration
"""


def test_vllm_s_loader_finding_a_parameter_the_model_lacks_is_the_checkpoint_s() -> None:
    assert reason_and_rule(_ARIA_VLLM) == ("checkpoint_load_error", "weights-not-in-model")


def test_the_same_sentence_from_v1_s_engine_core_and_mlx_s_loader() -> None:
    # vllm-project/vllm#28517: a custom architecture's checkpoint under TransformersForCausalLM
    assert (
        reason_of(
            "(EngineCore_DP0 pid=560891) ERROR 11-12 13:42:18 [core.py:708] ValueError: There is no module or parameter named 'mlp_AR' in TransformersForCausalLM"
        )
        == "checkpoint_load_error"
    )
    # Blaizzy/mlx-vlm#1001: LFM2.5-VL's projector norm, which mlx-vlm's model does not define
    assert (
        reason_of(
            "ValueError: Received 2 parameters not in model:\nmulti_modal_projector.layer_norm.bias,\nmulti_modal_projector.layer_norm.weight."
        )
        == "checkpoint_load_error"
    )


def test_other_parameters_named_or_received_are_not_a_load_failure() -> None:
    assert reason_of("There is no parameter named lr in this config; using the default") == "unknown"
    assert reason_of("Received 2 parameters from the server") == "unknown"
    # a missing module is the import's, not the checkpoint's
    assert reason_of("ModuleNotFoundError: No module named 'vllm'") == "import_error"
