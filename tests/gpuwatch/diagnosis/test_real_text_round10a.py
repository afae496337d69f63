"""Classes of misses from issue 19's tenth round, batch A (corpus cases 921-951: image, video and audio
generation training): crashes that a launcher reports by the other fatal signals (torchrun's SIGFPE) or in
its own words (Composer's "crashed with exit code -11"), the shell's job-control kill with a progress bar's
residue drawn after it, a worker's exception the DataLoader handed on without torch's "Caught ... in
DataLoader worker" line, a checkpoint that would not load in its loader's words, tensors on different
devices in torch 1.x's words, torch's indexing errors logged without the exception's name, and a program's
assertion on the options it was launched with. Error messages are verbatim from the public reports named
in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from gpuwatch.diagnosis.normalize import normalize
from tests.gpuwatch.diagnosis.real_text import reason_of

# ---------------------------------------------------------------- crashes a launcher reports

# XueZeyue/DanceGRPO#96 (case 930): training Wan2.1, the run dies as sampling starts and torchrun reports
# only the signal, SIGFPE (-8).
_DANCEGRPO_MINUS_8 = """
Steps:   0%|          | 0/100000 [00:00<?, ?it/s]
starting Progress:   0%|          | 0/20 [00:00<?, ?it/s]

E1030 11:57:04.095000 3920883 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -8) local_rank: 0 (pid: 3920953) of binary: /mnt/data/conda_envs/dancegrpo/bin/python
Traceback (most recent call last):
  File "/mnt/data/conda_envs/dancegrpo/lib/python3.10/runpy.py", line 196, in _run_module_as_main
    return _run_code(code, main_globals, None,
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""


def test_a_launcher_reporting_sigfpe_or_sigill_is_a_native_crash() -> None:
    assert reason_of(_DANCEGRPO_MINUS_8) == "framework_error"
    assert (
        reason_of("[ERROR] [launch.py:325:sigkill_handler] ['python', '-u', 'train.py'] exits with return code = -4")
        == "framework_error"
    )
    assert (
        reason_of("torch.multiprocessing.spawn.ProcessExitedException: process 1 terminated with signal SIGFPE")
        == "framework_error"
    )
    # a negative exit code that is not a signal's, and other numbers, are not these
    assert reason_of("failed (exitcode: -80) local_rank: 0 (pid: 12) of binary: /usr/bin/python") == "unknown"
    assert reason_of("INFO: step 8 exitcode 48 written to report") == "unknown"


# mosaicml/diffusion#140 (case 933): Composer's launcher, the only error line of an SD2 run.
_COMPOSER_MINUS_11 = """
Instantiating callbacks <composer.callbacks.memory_monitor.MemoryMonitor>
start to train........
[2024-05-07 09:39:45,572][composer.trainer.trainer][INFO] - Run name: 1715045985-burrowing-goshawk
ERROR:composer.cli.launcher:Rank 0 crashed with exit code -11.
Waiting up to 30 seconds for all training processes to terminate. Press Ctrl-C to exit immediately.
"""


def test_composers_account_of_a_crash_names_the_signal() -> None:
    assert reason_of(_COMPOSER_MINUS_11) == "framework_error"
    assert reason_of("ERROR:composer.cli.launcher:Global rank 0 (PID 147193) exited with code -11") == "framework_error"
    assert reason_of("ERROR:composer.cli.launcher:Rank 3 crashed with exit code -9.") == "host_oom"
    # an ordinary failure's exit code says nothing of a signal
    assert reason_of("ERROR:composer.cli.launcher:Rank 0 crashed with exit code 1.") == "unknown"


# ---------------------------------------------------------------- the shell's kill under a bar's residue

# d8ahazard/sd_dreambooth_extension#1366 (case 945): SDXL DreamBooth in the web UI, killed as it saves; a
# progress bar was redrawn after the shell's report, on the same line.
_WEBUI_KILLED = """
Saving weights/checkpoint...
webui.sh: line 255: 26147 Killed                  "${python_cmd}" -u "${LAUNCH_SCRIPT}" "$@"██████████████████████████████████| 1/1 [00:04<00:00,  4.76s/it]
"""


def test_the_shells_kill_with_a_bars_residue_after_it_is_host_memory() -> None:
    assert reason_of(_WEBUI_KILLED) == "host_oom"
    assert normalize(_WEBUI_KILLED.strip().splitlines()[1])[0].startswith("webui.sh: line 255: 26147 Killed")
    # an ordinary bar still reads as its postfix, and a message glued after a bar still reads alone
    assert normalize("Epoch 3:  41%|████      | 2011/4900 [31:12<44:50,  1.07it/s, loss=0.611]")[0] == "loss=0.611"
    assert normalize("steps:  10%|█         | 10/100 [00:10<01:30,  1.00it/s]Killed")[0] == "Killed"


# ---------------------------------------------------------------- a worker's exception, handed on

# YYuX-1145/Bert-VITS2-Integration-package#79 (case 946): a clip that libsndfile could not read; its
# exception's str() failed, so torch's "Caught ... in DataLoader worker process N" line is missing and the
# traceback ends in the loader's re-raise (a Windows install: backslashes).
_BERT_VITS2_LIBSNDFILE = r"""
  0%|          | 0/15 [00:10<?, ?it/s]
Traceback (most recent call last):
  File "train_ms.py", line 423, in train_and_evaluate
    for batch_idx, (
  File "E:\Bert-VITS2-2.3\venv\lib\site-packages\tqdm\std.py", line 1178, in __iter__
    for obj in iterable:
  File "E:\Bert-VITS2-2.3\venv\lib\site-packages\torch\utils\data\dataloader.py", line 630, in __next__
    data = self._next_data()
  File "E:\Bert-VITS2-2.3\venv\lib\site-packages\torch\utils\data\dataloader.py", line 1345, in _next_data
    return self._process_data(data)
  File "E:\Bert-VITS2-2.3\venv\lib\site-packages\torch\utils\data\dataloader.py", line 1371, in _process_data
    data.reraise()
  File "E:\Bert-VITS2-2.3\venv\lib\site-packages\torch\_utils.py", line 694, in reraise
    raise exception
soundfile.LibsndfileError: <exception str() failed>
"""


def test_an_exception_the_loader_hands_on_from_a_worker_is_the_datas() -> None:
    assert reason_of(_BERT_VITS2_LIBSNDFILE) == "dataloader_error"
    assert reason_of(_BERT_VITS2_LIBSNDFILE.replace("\\", "/").replace("E:/", "/home/u/")) == "dataloader_error"
    # a missing path re-raised from a worker is still the path's
    missing = _BERT_VITS2_LIBSNDFILE.replace(
        "soundfile.LibsndfileError: <exception str() failed>",
        "FileNotFoundError: [Errno 2] No such file or directory: 'Data/wavs/0001.wav'",
    )
    assert reason_of(missing) == "file_not_found"
    # an exception whose message names no data error is the loader's when a worker re-raised it, and not when the
    # main process raised it (libsndfile's own error is a decode error wherever it is raised: rounds 109-113,
    # audio-file-unreadable, so it cannot tell the two apart)
    other = "ValueError: could not convert string to float: 'abc'"
    assert reason_of(_BERT_VITS2_LIBSNDFILE.replace("soundfile.LibsndfileError: <exception str() failed>", other)) == (
        "dataloader_error"
    )
    main = _BERT_VITS2_LIBSNDFILE.split('  File "E:\\Bert-VITS2-2.3\\venv\\lib\\site-packages\\torch\\utils')[0]
    assert reason_of(main + other + "\n") != "dataloader_error"
    assert reason_of(main + "soundfile.LibsndfileError: <exception str() failed>\n") == "dataloader_error"


# ---------------------------------------------------------------- a checkpoint in its loader's words

# voicepaw/so-vits-svc-fork#584 (case 949): resuming from a truncated D_ checkpoint.
_SOVITS_FAILED_CHECKPOINT = """
[14:22:05] INFO     [14:22:05] Using strategy: auto                 train.py:98
           INFO     [14:22:05] GPU available: True (cuda), used: True
RuntimeError: Failed to load checkpoint
"""


def test_a_checkpoint_that_failed_to_load_in_its_loaders_words() -> None:
    assert reason_of(_SOVITS_FAILED_CHECKPOINT) == "checkpoint_load_error"
    assert reason_of("ValueError: Unable to load the checkpoint at ./ckpt/last.ckpt") == "checkpoint_load_error"
    # a checkpoint that is not there is the missing path's
    assert (
        reason_of("ERROR: Failed to load checkpoint: [Errno 2] No such file or directory: 'ckpt/last.pth'")
        == "file_not_found"
    )
    # a sharded model's loading bar is not a failure
    assert reason_of("Loading checkpoint shards: 100%|██████████| 2/2 [00:26<00:00, 13.03s/it]") == "unknown"
    assert reason_of("Could not load checkpoint shards index, falling back") == "unknown"


# ---------------------------------------------------------------- tensors on different devices, torch 1.x


# izmailovpavel/flowgmm#2 (case 951) and zhen8838/AnimeStylized#6 (case 923): two GPUs, a tensor the
# script left on the first.
def test_torch_1x_words_for_tensors_on_different_devices_are_the_scripts() -> None:
    assert reason_of("RuntimeError: expected device cuda:1 but got device cuda:0") == "script_error"
    assert (
        reason_of("RuntimeError: expected device cuda:0 and dtype Float but got device cpu and dtype Float")
        == "script_error"
    )


# ---------------------------------------------------------------- torch's indexing errors, logged

# fudan-generative-vision/hallo#124 (case 935): the training script's handler logs str(e) of torch's
# IndexError, without its name.
_HALLO_MASK = """
Steps:   0%|          | 0/30000 [00:00<?, ?it/s]
ERROR:root:Failed to execute the training process: The shape of the mask [0] at index 0 does not match the shape of the indexed tensor [1, 4096, 320] at index 0
"""


def test_torchs_indexing_errors_in_its_words_are_the_scripts() -> None:
    assert reason_of(_HALLO_MASK) == "script_error"
    assert reason_of("IndexError: too many indices for tensor of dimension 2") == "script_error"
    assert (
        reason_of("IndexError: too many indices for array: array is 1-dimensional, but 2 were indexed")
        == "script_error"
    )
    assert reason_of("IndexError: index 5 is out of bounds for dimension 0 with size 5") == "script_error"
    # the CUDA kernel's index assertion stays the device-side assert's
    assert (
        reason_of(
            '../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [56,0,0], thread: [64,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index out of bounds"` failed.'
        )
        == "framework_error"
    )


# ---------------------------------------------------------------- an assertion on the launch options

# acheong08/Diffusion-ColabUI#66 (case 925): textual inversion in the web UI, launched with a memory option
# its trainer refuses.
_WEBUI_LOWVRAM = """
Traceback (most recent call last):
  File "/content/stable-diffusion-webui/modules/call_queue.py", line 28, in f
    res = func(*args, **kwargs)
  File "/content/stable-diffusion-webui/modules/textual_inversion/ui.py", line 26, in train_embedding
    assert not shared.cmd_opts.lowvram, 'Training models with lowvram not possible'
AssertionError: Training models with lowvram not possible
"""


def test_an_assertion_on_the_launch_options_is_an_argument_error() -> None:
    assert reason_of(_WEBUI_LOWVRAM) == "argument_error"
    # an assertion on anything else in the same place is still the script's
    other = _WEBUI_LOWVRAM.replace("not shared.cmd_opts.lowvram", "len(embeddings) > 0")
    assert reason_of(other) == "script_error"


# ---------------------------------------------------------------- the closing cases (952-955)

# lmnt-com/diffwave#7 (case 952): diffwave's own learner divides by the length of an empty dataset; the
# package is an application's, not a framework's.
_DIFFWAVE_ZERO_DIVISION = """
Traceback (most recent call last):
  File "/usr/local/lib/python3.6/dist-packages/diffwave/learner.py", line 163, in _train_impl
    learner.train(max_steps=args.max_steps)
  File "/usr/local/lib/python3.6/dist-packages/diffwave/learner.py", line 104, in train
    for features in tqdm(self.dataset, desc=f'Epoch {self.step // len(self.dataset)}') if self.is_master else self.dataset:
ZeroDivisionError: integer division or modulo by zero
"""


def test_a_division_by_zero_in_an_application_package_is_the_scripts() -> None:
    assert reason_of(_DIFFWAVE_ZERO_DIVISION) == "script_error"
    # raised in a framework's own code, it is still the framework's
    in_torch = _DIFFWAVE_ZERO_DIVISION.replace(
        "dist-packages/diffwave/learner.py", "dist-packages/torch/optim/lr_scheduler.py"
    )
    assert reason_of(in_torch) == "framework_error"


# facebookresearch/audiocraft#477 (case 955): dora grid compares configs whose mandatory value was never
# set; the traceback comes back quoted from a process pool.
_DORA_MISSING_MANDATORY = '''
concurrent.futures.process._RemoteTraceback:
"""
Traceback (most recent call last):
  File "/home/user/miniconda/envs/audiocraft/lib/python3.9/site-packages/dora/hydra.py", line 67, in _compare_config
    ref_value = ref[key]
omegaconf.errors.MissingMandatoryValue: Missing mandatory value: channels
    full_key: channels
    object_type=dict
"""
'''


def test_a_mandatory_config_value_never_set_is_an_argument_error() -> None:
    assert reason_of(_DORA_MISSING_MANDATORY) == "argument_error"
    assert (
        reason_of("omegaconf.errors.MissingMandatoryValue: Missing mandatory value: model.encoder.dim")
        == "argument_error"
    )
