"""Classes of misses from issue 19's fifteenth round, batch B (corpus cases 1420-1427: speech enhancement and
source separation, retrieval and embedding-model, and code-LLM training runs): accelerate refusing a
distributed launch for a model one process loaded across devices, accelerate's collectives given a tensor left
on the CPU, a Rust data loader's worker thread that panics, and a dataset with no sample in torch's sampler's
words. Error messages are verbatim from the public reports named in each test; hosts, paths and pids may be
made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- a launch the loaded model cannot take

# huggingface/transformers#24242 (case 1423): StarCoder fine-tuned with torch.distributed.launch on 8 P40s.
_EIGHT_BIT_DISTRIBUTED = """
$ python -m torch.distributed.launch --nproc_per_node 8 finetune.py --model_path="bigcode/starcoder" --dataset_name="HuggingFaceH4/CodeAlpaca_20K" --split="train" --size_valid_set 10000 --streaming --seq_length 2048 --max_steps 1000 --batch_size 4
    raise ValueError(
ValueError: You can't train a model that has been loaded in 8-bit precision on multiple devices in any distributed mode. In order to use 8-bit models that have been loaded across multiple GPUs the solution is to use Naive Pipeline Parallelism. Therefore you should not specify that you are under any distributed regime in your accelerate config.
"""


def test_an_8bit_model_refused_in_a_distributed_launch_is_the_launch() -> None:
    assert reason_and_rule(_EIGHT_BIT_DISTRIBUTED) == ("argument_error", "launch-gpu-setup")


def test_a_device_map_auto_model_refused_in_a_distributed_launch_is_the_launch_too() -> None:
    assert (
        reason_of(
            "ValueError: You can't train a model that has been loaded with `device_map='auto'` in any distributed mode. Please rerun your script specifying `--num_processes=1` or by launching with `python {{myscript.py}}`."
        )
        == "argument_error"
    )


def test_other_8bit_refusals_are_not_a_launch() -> None:
    # Loaded on another device than the one it trains on: a placement in the script, not the launcher's.
    assert (
        reason_of(
            "ValueError: You can't train a model that has been loaded in 8-bit precision on a different device than the one you're training on."
        )
        != "argument_error"
    )


# ---------------------------------------------------------------- a collective given a tensor on the CPU

# codefuse-ai/CodeFuse-DevOps-Model#5 (case 1424): full SFT with train_bash.py, evaluating every epoch.
_GATHER_NOT_ON_GPU = """
***** Running Evaluation *****
  Batch size = 8
RuntimeError: One or more of the tensors passed to `gather` were not on the GPU while the `Accelerator` is configured for CUDA. Please move it to the GPU before calling `gather`.
"""


def test_accelerate_gather_given_a_cpu_tensor_is_the_callers_placement() -> None:
    assert reason_and_rule(_GATHER_NOT_ON_GPU) == ("script_error", "device-mismatch")


def test_the_other_collectives_say_it_in_the_same_words() -> None:
    assert (
        reason_of(
            "RuntimeError: One or more of the tensors passed to `reduce` were not on the GPU while the `Accelerator` is configured for CUDA. Please move it to the GPU before calling `reduce`."
        )
        == "script_error"
    )


# ---------------------------------------------------------------- a Rust data loader's worker that panics

# Rikorose/DeepFilterNet#474 (case 1425): df/train.py on the user's HDF5 data, at the start of epoch 2.
_DF_WORKER_PANIC = """
2023-12-06 02:40:53 | INFO     | DF | Start train epoch 2 with batch size 1
thread 'DataLoader Worker 1' panicked at 'assertion failed: k <= self.len()', /rustc/5680fa18feaa87f3ff04063800aec256c3d4b4be/library/core/src/slice/mod.rs:3420:9
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
Aborted (core dumped)
"""


def test_a_data_loader_worker_thread_that_panics_is_the_data_not_a_native_crash() -> None:
    assert reason_and_rule(_DF_WORKER_PANIC) == ("dataloader_error", "dataloader")


def test_the_rust_loaders_own_error_is_the_data_loader() -> None:
    # Rikorose/DeepFilterNet#216 and #393 (titles): the Python side of the same loader.
    assert reason_of('RuntimeError: DF dataloader error: ThreadJoinError("Any { .. }")') == "dataloader_error"


def test_a_panic_in_another_thread_is_not_the_data_loader() -> None:
    assert (
        reason_of(
            "thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: Os { code: 2, kind: NotFound }', src/main.rs:12:5"
        )
        != "dataloader_error"
    )


# ---------------------------------------------------------------- a dataset with no sample

# facebookresearch/demucs#133 (case 1427): Demucs trained on Windows with --musdb at MusDB's train folder.
_NUM_SAMPLES_ZERO = """
  File "D:\\demucs-master\\demucs-master\\demucs\\train.py", line 38, in train_model
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, shuffle=True)
  File "D:\\anaconda3\\envs\\demucs\\lib\\site-packages\\torch\\utils\\data\\dataloader.py", line 213, in __init__
    sampler = RandomSampler(dataset)
  File "D:\\anaconda3\\envs\\demucs\\lib\\site-packages\\torch\\utils\\data\\sampler.py", line 94, in __init__
    "value, but got num_samples={}".format(self.num_samples))
ValueError: num_samples should be a positive integer value, but got num_samples=0
Task 0 died with exit code 1
"""


def test_an_empty_dataset_in_torchs_sampler_words_is_the_data() -> None:
    assert reason_and_rule(_NUM_SAMPLES_ZERO) == ("dataloader_error", "empty-dataset")


def test_torch_1_0s_spelling_of_it_too() -> None:
    assert (
        reason_of("ValueError: num_samples should be a positive integeral value, but got num_samples=0")
        == "dataloader_error"
    )
