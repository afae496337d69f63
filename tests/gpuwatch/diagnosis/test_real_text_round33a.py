"""Classes of misses from issue 19's thirty-third round (corpus cases 2062-2078, JAX's training libraries and
self-play training: Flax, Orbax, Tunix, jaxline, muzero-general, DI-star, Leela Zero and Leela Chess Zero;
2082-2098, mixture-of-experts systems and the launchers, trackers and sweeps around a run: submitit, Hydra,
DVC, neptune, Ray Tune): JAX's wrapper around an exception, JAX libraries as frameworks, a checkpoint
directory already there, numpy's sampler on NaN priorities, weights that do not parse, an error named for an
invalid path, Windows' exit status for a missing DLL and its other crash statuses, Go's exec on a missing
program, the Slurm client's refusal handed on inside an exception, torch's device-index check and NCCL with
no GPU, and argument refusals after a program's name or before a usage line. Error messages are verbatim from
the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# google/flax#3117 (case 2062).
_UNFILTERED = """
(flax-imagenet) user@gpu-ws05:~/flax/examples/imagenet$ python imagenet_fake_data_benchmark.py
jax._src.traceback_util.UnfilteredStackTrace: AttributeError: module 'flax.linen.initializers' has no attribute 'zeros_init'
"""

# google-deepmind/deepmind-research#310 (case 2076): jaxline's platform, installed.
_JAXLINE = """
Traceback (most recent call last):
  File "perceiver/train/experiment.py", line 538, in <module>
    app.run(functools.partial(platform.main, Experiment))
  File "/home/jamy/addons/anaconda3/envs/my_env/lib/python3.8/site-packages/absl/app.py", line 258, in _run_main
    sys.exit(main(argv))
  File "/home/jamy/addons/anaconda3/envs/my_env/lib/python3.8/site-packages/jaxline/platform.py", line 110, in main
    config = _CONFIG.value
AttributeError: 'NoneType' object has no attribute 'value'
"""

# google/tunix#995 (case 2063): qwix calls a method through Flax NNX's attribute hook.
_QWIX = """
  File "/usr/local/lib/python3.12/site-packages/jax/_src/tree_util.py", line 361, in <genexpr>
    return treedef.unflatten(f(*xs) for xs in zip(*all_leaves))
                             ^^^^^^
  File "/usr/local/lib/python3.12/site-packages/qwix/_src/flax_util.py", line 293, in fn
    return unbox(x.get_raw_value())
                 ^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/site-packages/flax/nnx/variablelib.py", line 299, in __getattr__
    return getattr(self.raw_value, name)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AttributeError: 'jaxlib._jax.ArrayImpl' object has no attribute 'get_raw_value'
"""

# Physical-Intelligence/openpi#566 (case 2064).
_CKPT_EXISTS = """
FileExistsError: [Errno 17] File exists: '/home/lyx/openpi/checkpoints/cobot_put_pen_into_cantainer/cobot_putpen_chw/30000.orbax-checkpoint-tmp-0'
00:28:21.238 [I] [process=0][thread=MainThread][step=30000] Starting CheckpointManager Save Finalize thread=save_finalize (305741:checkpoint_manager.py:1453)
"""

# werner-duvaud/muzero-general#40 (case 2068).
_PROBS_NAN = """
  File "/home/gustav/Desktop/muzero-general/replay_buffer.py", line 133, in sample_game
    game_index = numpy.random.choice(len(self.buffer), p=game_probs)
  File "mtrand.pyx", line 920, in numpy.random.mtrand.RandomState.choice
ValueError: probabilities contain NaN
"""

# glinscott/leela-chess#325 (case 2073).
_WEIGHTS = """
Using 1 thread(s).
Detecting residual layers...v2...128 channels...10 blocks.

Failed to parse weight file. Error on line 90.
2018/04/15 16:25:26 exit status 1
"""

# opendilab/DI-star#14 (case 2071).
_INVALID_PATH = """
Start decoding replay with player 1, path: ./trainingreplays\\reynorvssoul1.SC2Replay
12380 [ERROR] parse replay error SC2APIProtocol.ResponseReplayInfo.Error.InvalidReplayPath: ''
"""

# LeelaChessZero/lczero-client#40 (case 2077): the status runs into the next line's timestamp, as reported.
_DLL_STATUS = """
2018/08/09 23:11:23 lc0_main.go:477: Waiting for lc0 to stop
lc0 exited with: exit status 32212257812018/08/09 23:11:23 lc0_main.go:482: lc0 stopped
2018/08/09 23:11:23 lc0_main.go:661: Client self-exited without producing any games.
"""

# LeelaChessZero/lczero-client#38 (case 2078).
_GO_EXEC = """
2018/08/03 11:02:23 lc0_main.go:315: exec: "C:\\\\Users\\\\USER\\\\Programs\\\\Leela Chess Zero/lc0": file does not exist
"""

# facebookincubator/submitit#1710 (case 2094) and NVIDIA/NeMo-Framework-Launcher#72 (case 2095).
_SBATCH_IN_EXCEPTION = [
    "submitit.core.utils.FailedJobError: sbatch: error: Parameter --gres=gpu:1 no longer acceptable, please switch to --gpus=1",
    "OSError: sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification",
]

# hydra-ecosystem/hydra#2465 (case 2088).
_DEVICE_INDEX = """
  File "/scratch/s.1915438/env/modulus/lib/python3.9/site-packages/hydra/core/utils.py", line 260, in return_value
    raise self._return_value
torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at "../aten/src/ATen/cuda/CUDAContext.cpp":50, please report a bug to PyTorch.
"""

# facebookincubator/submitit#1642 (case 2098).
_NCCL_NO_GPU = """
  File "/home/user/skanaconda3/envs/url/lib/python3.8/site-packages/submitit/core/submission.py", line 53, in process_job
    result = delayed.result()
RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!
"""

# minerva-ml/open-solution-value-prediction#43 (case 2090) and treeverse/dvc.org#220 (case 2089).
_NEPTUNE = "neptune: Executing in Offline Mode.\nneptune: Error: Invalid parameter 'train'. Parameter names must begin with double dash.\n"
_USAGE = "Running command:\n\tpython src/train.py -d data/features model.pkl\nArguments error. Usage:\n\tpython train.py features model\n"


def test_jax_s_unfiltered_stack_trace_hands_on_the_exception_after_it() -> None:
    assert reason_of(_UNFILTERED) == "script_error"
    # without the wrapper's name the same line was read the same way: the wrapper only hid it
    assert reason_of(_UNFILTERED.replace("jax._src.traceback_util.UnfilteredStackTrace: ", "")) == "script_error"


def test_jax_training_libraries_own_attribute_bugs_are_theirs() -> None:
    assert reason_of(_JAXLINE) == "framework_error"
    assert reason_of(_QWIX) == "framework_error"
    # an application installed as a package is still the run's (stylegan2_pytorch's cli, case 724)
    assert reason_of(_JAXLINE.replace("site-packages/jaxline/", "site-packages/myapp/")) == "script_error"


def test_a_checkpoint_directory_already_there_is_storage() -> None:
    assert reason_and_rule(_CKPT_EXISTS) == ("storage_error", "storage")
    # a file that exists where no checkpoint is written is not storage's
    assert reason_of("FileExistsError: [Errno 17] File exists: 'outputs/run1'") != "storage_error"


def test_numpy_sampling_on_nan_probabilities_is_divergence() -> None:
    assert reason_and_rule(_PROBS_NAN) == ("loss_divergence", "distribution-parameters-nan")


def test_weights_that_do_not_parse_are_a_checkpoint_load_error() -> None:
    assert reason_and_rule(_WEIGHTS) == ("checkpoint_load_error", "state-dict")


def test_an_error_named_for_an_invalid_path_is_a_missing_file() -> None:
    assert reason_and_rule(_INVALID_PATH) == ("file_not_found", "file-not-found-in-message")
    assert reason_of("errors.PathNotFoundError: /data/train") == "file_not_found"
    # a line that only names a path is not one
    assert reason_of("Start decoding replay with player 1, path: ./trainingreplays/x.SC2Replay") == "unknown"


def test_windows_exit_status_for_a_missing_dll_is_the_installation() -> None:
    assert reason_and_rule(_DLL_STATUS) == ("import_error", "windows-dll-not-found")
    assert reason_of("Process finished with exit code -1073741515 (0xC0000135)") == "import_error"


@pytest.mark.parametrize("status", ["3221226505", "-1073740791", "3221225725", "-1073741571"])
def test_windows_other_crash_statuses_are_native_crashes(status: str) -> None:
    line = (
        f"subprocess.CalledProcessError: Command '['python.exe', 'train.py']' returned non-zero exit status {status}."
    )
    assert reason_and_rule(f"exit code {status}\n") == ("framework_error", "segfault-in-text")
    assert reason_of(line) == "framework_error"


def test_go_exec_of_a_missing_program_is_a_missing_file() -> None:
    assert reason_and_rule(_GO_EXEC) == ("file_not_found", "missing-path-outside-python")


@pytest.mark.parametrize("line", _SBATCH_IN_EXCEPTION)
def test_the_slurm_client_s_refusal_inside_an_exception_is_the_request(line: str) -> None:
    assert reason_and_rule(line) == ("argument_error", "slurm-request-invalid")


def test_torch_s_device_index_check_is_an_invalid_ordinal() -> None:
    assert reason_and_rule(_DEVICE_INDEX) == ("argument_error", "invalid-device-ordinal")


def test_nccl_in_a_process_that_sees_no_gpu_is_the_installation() -> None:
    assert reason_and_rule(_NCCL_NO_GPU) == ("import_error", "gpu-support-absent")


def test_argument_refusals_after_a_program_s_name_or_before_its_usage() -> None:
    assert reason_and_rule(_NEPTUNE) == ("argument_error", "click-usage-error")
    assert reason_and_rule(_USAGE) == ("argument_error", "cli-parser-refusal")
    # prose about a usage error is not one
    assert reason_of("See the usage error section of the docs. Usage: train.py\n") == "unknown"


# alibaba/ROLL (case 1593) and Netflix/metaflow (case 1626), misses of round 21 fixed with this round's.
_QUOTED_NOT_FOUND = 'Agentic Training Failed with "rock: command not found"\n'
_BIN_NOT_FOUND = "2020-09-08 10:12:40.551 [41/train_model/208 (pid 31220)] [1f7c33a2-9b1e-4b61-a0e4-3c0f4d4b7d10] metaflow_TrainingFlow_linux-64_32c5addd6e1821a744b44408e0fdccd919b138c9/bin/python: not found\n"


def test_the_shell_s_missing_program_quoted_or_after_a_log_prefix() -> None:
    assert reason_and_rule(_QUOTED_NOT_FOUND) == ("file_not_found", "missing-path-outside-python")
    assert reason_and_rule(_BIN_NOT_FOUND) == ("file_not_found", "missing-path-outside-python")
    # a package a resolver did not find is not a missing program
    assert reason_of("Requirement already satisfied; optional extra gpu: not found\n") != "file_not_found"


# aws/aws-parallelcluster (case 1624) and Azure/MachineLearningNotebooks (case 1640), misses of round 21.
_HOST_LOOKUP = """
slurmstepd: error: get_exit_code task 0 died by signal: 15
slurmstepd: error: Unable to resolve "ip-172-31-82-201": Host name lookup failure
slurmstepd: error: Unable to establish control machine address
"""
_CLUSTER_FAILED = "PipelineRun Status: NotStarted\nAzureMLCompute cluster gpu-cluster is in failed state and thus not ready for runs\n"


def test_a_node_that_cannot_resolve_itself_or_a_failed_cluster_is_the_nodes() -> None:
    assert reason_and_rule(_HOST_LOOKUP) == ("node_failure", "emitter-cluster-node-unusable")
    assert reason_and_rule(_CLUSTER_FAILED) == ("node_failure", "emitter-cluster-node-unusable")
    # a run's own state is not a cluster's
    assert reason_of("Run train-42 is in failed state\n") != "node_failure"
