"""Classes of misses from issue 19's twenty-sixth round (corpus cases 1782-1794, robot learning: Diffusion Policy,
robomimic, CALVIN, ACT, DPPO, RoboVerse; 1802-1821, LLM quantization and compression: AutoGPTQ, AutoAWQ,
exllamav2, llm-compressor, NNCF, AQLM, OmniQuant, llama.cpp's imatrix): Hydra's "Error locating target" quoted
alone; the command-line parsers beside argparse and click (tyro, absl, python-fire); a missing file said in other
words ("neither exists ... nor"); the array stores a dataset is read from (zarr, h5py) as general-purpose
libraries, whose lookups are the caller's; an Exception raised with no message at all; ggml's assertions and
aborts; an extension that does not build on the machine. Error messages are verbatim from the public reports
named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- the command line and the config

# irom-princeton/dppo#49 (case 1790): the report quotes Hydra's sentence alone.
_HYDRA_LOCATE_ALONE = """
$ python script/run.py --config-name=eval_diffusion_mlp --config-dir=cfg/robomimic/eval/square
Error locating target 'model.diffusion.diffusion_eval_ft.DiffusionEval'
"""

# RoboVerseOrg/RoboVerse#127 (case 1791): tyro refusing the README's flags.
_TYRO_UNRECOGNIZED = """
(roboverse) lmy@ubuntu2204:~/RoboVerse$ python roboverse_learn/eval.py --task CloseBox --sim isaaclab --algo_run_name CloseBox_franka_10 --checkpoint_num 400
╭─ Unrecognized options ─────────────────────────────────╮
│ Unrecognized options: --algo-run-name --checkpoint-num │
╰────────────────────────────────────────────────────────╯
"""


def test_hydra_s_locating_failure_quoted_alone_is_an_import_error() -> None:
    assert reason_and_rule(_HYDRA_LOCATE_ALONE) == ("import_error", "import")


def test_tyro_absl_and_fire_refusing_the_command_line_are_argument_errors() -> None:
    assert reason_and_rule(_TYRO_UNRECOGNIZED) == ("argument_error", "cli-parser-refusal")
    assert (
        reason_of("I1126 10:00:00 app.py:12] starting\nFATAL Flags parsing error: Unknown command line flag 'lr'")
        == "argument_error"
    )
    assert reason_of("ERROR: Could not consume arg: --epochs\nUsage: train.py <flags>") == "argument_error"


def test_prose_about_options_is_not_a_refusal() -> None:
    assert reason_of("INFO training with unrecognized options ignored by the wrapper\nstep 10 loss 2.1") == "unknown"


# ---------------------------------------------------------------- files and stores

# RoboVerseOrg/RoboVerse#187 (case 1793): the report's title.
_NEITHER_EXISTS = """
(roboverse) fjg@ws-3090:~/RoboVerse$ python get_started/rl/0_ppo_reaching.py --sim mujoco --task debug:reach_origin --num_envs 4
Exception: File roboverse_data/trajs/debug/reach_origin/franka_v2.json neither exists in the local directory nor exists in the huggingface dataset. Please report this issue to the developers.
"""


def test_a_file_that_neither_exists_here_nor_there_is_file_not_found() -> None:
    assert reason_and_rule(_NEITHER_EXISTS) == ("file_not_found", "file-not-found-in-message")
    assert reason_of("ValueError: Path /data/shards/train-00001.tar doesn't exist") == "file_not_found"


# Junxix/S2I#2 (case 1782): zarr's group lookup, asked by the run's replaced sampler.
_ZARR_KEYERROR = """
Traceback (most recent call last):
  File "/home/ubuntu/miniconda3/envs/robodiff/lib/python3.9/site-packages/hydra/_internal/instantiate/_instantiate2.py", line 92, in _call_target
    return _target_(*args, **kwargs)
  File "/home/ubuntu/diffusion_policy/diffusion_policy/dataset/robomimic_replay_image_dataset.py", line 115, in __init__
    sampler = SequenceSampler(
  File "/home/ubuntu/diffusion_policy/diffusion_policy/common/sampler.py", line 129, in __init__
    marks = replay_buffer["marks"]
  File "/home/ubuntu/diffusion_policy/diffusion_policy/common/replay_buffer.py", line 416, in __getitem__
    return self.data[key]
  File "/home/ubuntu/miniconda3/envs/robodiff/lib/python3.9/site-packages/zarr/hierarchy.py", line 429, in __getitem__
    raise KeyError(item)
KeyError: 'marks'
"""


def test_a_key_the_run_asks_of_an_array_store_is_the_run_s() -> None:
    assert reason_of(_ZARR_KEYERROR) == "script_error"


def test_the_same_lookup_asked_by_a_framework_s_code_stays_the_framework_s() -> None:
    framework = _ZARR_KEYERROR.replace(
        "/home/ubuntu/diffusion_policy/diffusion_policy/common/replay_buffer.py",
        "/home/ubuntu/miniconda3/envs/robodiff/lib/python3.9/site-packages/diffusers/utils/replay_buffer.py",
    )
    assert reason_of(framework) == "framework_error"


# ---------------------------------------------------------------- a framework's own failures

# casper-hansen/AutoAWQ#600 (case 1805): 'raise Exception' in AutoAWQ's quantizer, and nothing more.
_AWQ_BARE_EXCEPTION = """
  File "/usr/local/lib/python3.10/dist-packages/awq/quantize/quantizer.py", line 330, in _search_best_scale
    best_scales = self._compute_best_scale(
  File "/usr/local/lib/python3.10/dist-packages/awq/quantize/quantizer.py", line 409, in _compute_best_scale
    raise Exception
Exception
"""


def test_an_exception_raised_with_no_message_is_judged_by_its_frame() -> None:
    head = 'Traceback (most recent call last):\n  File "/workspace/quantize.py", line 12, in <module>\n    model.quantize(tokenizer, quant_config=quant_config)\n'
    assert reason_of(head + _AWQ_BARE_EXCEPTION.strip("\n")) == "framework_error"
    in_script = (head + _AWQ_BARE_EXCEPTION.strip("\n")).replace(
        "/usr/local/lib/python3.10/dist-packages/awq/quantize/quantizer.py", "/workspace/my_quantizer.py"
    )
    assert reason_of(in_script) == "script_error"


# ggml-org/llama.cpp#6136 (case 1819) and ikawrakow/ik_llama.cpp#601 (case 1818).
_GGML_ASSERT = """
llama_model_loader: - kv   4:                          llama.block_count u32              = 32
GGML_ASSERT: ggml-backend.c:1526: n_inputs < GGML_SCHED_MAX_SPLIT_INPUTS
"""
_GGML_FATAL = """
compute_imatrix: computing over 3 chunks with batch_size 512
/home/lissanro/pkgs/ik_llama.cpp/ggml/src/ggml.c:15229: fatal error
/home/lissanro/pkgs/ik_llama.cpp/ggml/src/ggml.c:15229: fatal error
"""


def test_ggml_s_assertions_and_aborts_are_the_framework_s() -> None:
    assert reason_and_rule(_GGML_ASSERT) == ("framework_error", "native-abort")
    assert reason_and_rule(_GGML_FATAL) == ("framework_error", "native-abort")
    assert reason_of("/llama.cpp/ggml/src/ggml-cpu/ops.cpp:4823: GGML_ASSERT(ne00 == ne01) failed") == "framework_error"


def test_ggml_s_abort_after_a_cuda_out_of_memory_is_the_out_of_memory() -> None:
    log = "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 20480.00 MiB on device 0: cudaMalloc failed: out of memory\nGGML_ASSERT: ggml-backend.c:1526: buf != NULL"
    assert reason_of(log) == "gpu_oom"


# openvinotoolkit/nncf#3033 (case 1811): NNCF's CUDA extension does not build on the machine.
_NNCF_EXTENSIONS = """
  File "/home/chenxc/anaconda3/envs/Grounding/lib/python3.8/site-packages/nncf/torch/quantization/quantize_model.py", line 253, in quantize_impl
    compression_ctrl, compressed_model = create_compressed_model(
RuntimeError: CUDA is available for PyTorch, but NNcF could not compile GPu quan tization extensions.
"""


def test_an_extension_that_does_not_build_here_is_an_import_error() -> None:
    assert reason_and_rule(_NNCF_EXTENSIONS) == ("import_error", "extension-build-failed")
    assert (
        reason_of(
            "Traceback (most recent call last):\n  File \"/opt/conda/lib/python3.10/site-packages/deepspeed/ops/op_builder/builder.py\", line 445, in load\n    return self.jit_load(verbose)\nRuntimeError: Error building extension 'cpu_adam'"
        )
        == "import_error"
    )
