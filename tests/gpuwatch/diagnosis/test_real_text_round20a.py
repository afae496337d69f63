"""Classes of misses from issue 19's twentieth round (corpus cases 1580-1597: LLM pretraining, fine-tuning and RL
post-training stacks other than Megatron-LM and DeepSpeed: torchtitan, torchtune, MaxText, Levanter, llm-foundry and
Composer, Liger-Kernel, NeMo-RL, InternEvo, open-r1, ROLL, Tina): click's usage errors (a CLI that refuses its
command line), jax's check that jaxlib fits it, triton's JIT launcher failing on its own cache key, a bus error that
only the shell or a launcher reports, and torch's C++ exception known only by its backtrace. Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
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


# ---------------------------------------------------------------- triton's JIT launcher and its cache key

# mosaicml/llm-foundry#159 (case 1583): MPT's triton attention, global rank 1's STDERR under Composer's launcher.
_LLM_FOUNDRY_BWD_KERNEL_KEY = r"""
----------Begin global rank 1 STDERR----------
/home/LMFlow/cn_llama/packages/new/llm-foundry/llmfoundry-venv/lib/python3.10/site-packages/composer/callbacks/speed_monitor.py:120: UserWarning: gpu_flop count not found for None with precision: amp_fp16; MFU cannot be calculated and reported. gpu_flops_available can be manuallyoverridden by setting gpu_flops_available in SpeedMonitor.
  warnings.warn(
Traceback (most recent call last):
  File "<string>", line 21, in _bwd_kernel
KeyError: ('2-.-0-.-0-5ef8f334a15fe35aaf5db62d90ceef62-2b0c5161c53c71b37ae20a9996ee4bb8-c1f92808b4e4644c1732e8338187ac87-d962222789c30252d492a16cca3bf467-12f7ac1ca211e037f62a7c0c323d9990-5c5e32ff210f3b7f56c98ca29917c25e-06f0df2d61979d629033f4a22eff5198-0dd03b0bd512a184b3512b278d9dfa59-d35ab04ae841e2714a253c523530b071', (torch.float16, torch.float16, torch.float16, None, torch.float16, torch.float32, torch.float16, torch.float16, torch.float32, torch.float32, 'fp32', 'i32', 'i32', 'i32'), ('none', True, 64, False, True, True, True, 128, 128), (True, True, True, (False,), True, True, True, True, True, True, (False,), (True, False), (True,
"""


def test_triton_s_launcher_failing_on_its_cache_key_is_the_framework_s() -> None:
    assert reason_and_rule(_LLM_FOUNDRY_BWD_KERNEL_KEY) == ("framework_error", "triton-jit-cache-key-keyerror")


def test_the_forward_kernel_s_key_with_an_empty_hash_reads_the_same() -> None:
    # mosaicml/examples#447 (case 1587) has the key of _fwd_kernel; iwalton3/mpt-lora-patch#5 the same launcher
    # with the first hash empty ('2-.-0-.-0--2b0c...')
    text = r"""
Traceback (most recent call last):
  File "<string>", line 21, in _fwd_kernel
KeyError: ('2-.-0-.-0-d82511111ad128294e9d31a6ac684238-7929002797455b30efce6e41eddc6b57-3aa563e00c5c695dd945e23b09a86848-d962222789c30252d492a16cca3bf467', (torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.float32, 'fp32', 'i32'), ('matrix', False, 64, True, True, True, 128, 128), (True, True, True, True, True, True, True, (False,), (True, False), (True, Fal
"""
    assert reason_of(text) == "framework_error"
    assert (
        reason_of(
            "KeyError: ('2-.-0-.-0--2b0c5161c53c71b37ae20a9996ee4bb8-c1f92808b4e4644c1732e8338187ac87-d962222789c30252d492a16cca3bf467', (torch.float16, torch.float16"
        )
        == "framework_error"
    )


def test_a_script_s_own_tuple_key_stays_the_script_s() -> None:
    text = """
Traceback (most recent call last):
  File "/home/user/train.py", line 88, in <module>
    weight = class_weights[("cat", "dog")]
KeyError: ('cat', 'dog')
"""
    assert reason_of(text) == "script_error"


# ---------------------------------------------------------------- a bus error that only the shell or a launcher reports

# mosaicml/llm-foundry#82 (case 1585): the quickstart's text_data.py in the mosaicml/pytorch Docker image.
_LLM_FOUNDRY_SHELL_BUS_ERROR = r"""
root@e81df48d8ecb:/home/llm-foundry/scripts/train# python ../../llmfoundry/data/text_data.py --local_path ./my-copy-c4 --split val_small
Bus error (core dumped)
root@e81df48d8ecb:/home/llm-foundry# /usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to be 2 leaked shared_memory objects to clean up at shutdown
  warnings.warn('resource_tracker: There appear to be %d '
"""

# mosaicml/llm-foundry#258 (case 1582): fine-tuning in the provided image, only Composer's launcher speaks.
_COMPOSER_RANK_EXIT_MINUS_7 = r"""
Building eval loader...
Building trainer...
ERROR:composer.cli.launcher:Rank 2 crashed with exit code -7.
"""


def test_the_shell_s_bus_error_line_is_a_shell_reported_crash() -> None:
    assert reason_and_rule(_LLM_FOUNDRY_SHELL_BUS_ERROR) == ("framework_error", "native-crash-reported")


def test_a_launcher_s_sigbus_reads_as_its_segfault_does() -> None:
    assert reason_and_rule(_COMPOSER_RANK_EXIT_MINUS_7) == ("framework_error", "native-crash-reported")
    assert (
        reason_of(
            "E0814 00:45:42.793000 25019 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -7) local_rank: 0 (pid: 25105) of binary: /usr/bin/python"
        )
        == "framework_error"
    )


def test_node_local_evidence_still_makes_a_bus_error_the_node_s() -> None:
    # the kernel's uncorrectable memory error on the node outranks the shell's line (as case 036)
    text = """
Jun  3 02:11:40 gpu-j03 kernel: [884213.113071] EDAC MC0: 1 UE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x1c23a1 offset:0x0 grain:32 syndrome:0x0)
Bus error (core dumped)
"""
    assert reason_of(text) == "node_failure"


def test_a_data_loader_worker_s_bus_error_stays_the_worker_s() -> None:
    text = "RuntimeError: DataLoader worker (pid 3855) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit."
    assert reason_of(text) == "dataloader_error"


def test_a_sigabrt_from_the_launcher_alone_is_a_native_abort() -> None:
    # Round 103 (case 4346) reads -6 after all, weakly: where NCCL's watchdog aborted the process (case 475) its own
    # timeout lines outrank it (test_the_message_above_the_backtrace_still_decides); shangshang-wang/Tina#10 (case 1594)
    assert reason_and_rule("failed (exitcode: -6) local_rank: 0 (pid: 25105) of binary: /usr/bin/python3.10") == (
        "framework_error",
        "native-crash-reported",
    )


# ---------------------------------------------------------------- torch's C++ exception known only by its backtrace

# shangshang-wang/Tina#10 (case 1594): GRPO on one A6000 under accelerate; the excerpt starts inside the backtrace.
_TINA_C10_FRAMES = r"""
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7434c5f6c446 in /home/nick11roberts/miniconda3/envs/tina/lib/python3.10/site-packages/torch/lib/libc10.so)
frame #1: <unknown function> + 0xe3f297 (0x74347743f297 in /home/nick11roberts/miniconda3/envs/tina/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)
frame #2: <unknown function> + 0x145c0 (0x7434c643b5c0 in /home/nick11roberts/miniconda3/envs/tina/lib/python3.10/site-packages/torch/lib/libtorch.so)
frame #3: <unknown function> + 0x9caa4 (0x7434d8c9caa4 in /lib/x86_64-linux-gnu/libc.so.6)
frame #4: <unknown function> + 0x129c3c (0x7434d8d29c3c in /lib/x86_64-linux-gnu/libc.so.6)

E0814 00:45:42.793000 25019 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 0 (pid: 25105) of binary: /home/nick11roberts/miniconda3/envs/tina/bin/python3.10
"""


def test_c10_s_backtrace_with_its_message_cut_is_torch_s_own_exception() -> None:
    assert reason_and_rule(_TINA_C10_FRAMES[: _TINA_C10_FRAMES.index("E0814")]) == (
        "framework_error",
        "c10-error-backtrace",
    )
    # with the launcher's -6 under it (read since round 103), the same reason
    assert reason_of(_TINA_C10_FRAMES) == "framework_error"


def test_the_message_above_the_backtrace_still_decides() -> None:
    cuda = "RuntimeError: CUDA error: an illegal memory access was encountered\n" + _TINA_C10_FRAMES
    assert reason_of(cuda) == "cuda_error"
    watchdog = (
        "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800082 milliseconds before timing out.\n"
        + _TINA_C10_FRAMES
    )
    assert reason_of(watchdog) == "nccl_timeout"
