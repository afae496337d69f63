"""Classes of misses from issue 19's twenty-second round (corpus cases 1660-1686: speech and audio training
recipes: WeNet, Whisper fine-tuning repositories, CosyVoice, SpeechBrain, HiFi-GAN and WaveGlow, audiolm-pytorch,
PaddleSpeech, an EnCodec trainer, a MusicGen trainer, Bert-VITS2, MockingBird, DiffSinger, Real-Time-Voice-Cloning,
Lhotse in NeMo): PaddlePaddle's own failure signal handler ("FatalError: `Erroneous arithmetic operation` is
detected by the operating system."), a native crash only the handler reports; and the failed rank's own traceback
that torchrun's ChildFailedError summary quotes from its error_file ("traceback : Traceback (most recent call
last):"), read as a traceback, not as loose lines; and the interpreter's IndexError sentence quoted without the
exception's name ("list index out of range"), as its TypeError sentences already were. Error messages are verbatim from the
public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- PaddlePaddle's failure signal handler

# PaddlePaddle/PaddleSpeech#2503 (case 1673): the aishell conformer recipe on an A100 dies at its first steps.
_PADDLESPEECH_SIGFPE = r"""
2022-10-08 07:16:43.987 | INFO     | paddlespeech.s2t.training.trainer:resume_or_scratch:225 - Init from scratch!
2022-10-08 07:16:44.466 | INFO     | paddlespeech.s2t.exps.u2.model:do_train:160 - Train Total Examples: 30025
/home/PaddleSpeech/paddlespeech/audio/transform/spec_augment.py:48: DeprecationWarning: BICUBIC is deprecated and will be removed in Pillow 10 (2023-07-01). Use Resampling.BICUBIC instead.
FatalError: `Erroneous arithmetic operation` is detected by the operating system.
"""


def test_paddle_s_signal_handler_is_a_native_crash() -> None:
    assert reason_and_rule(_PADDLESPEECH_SIGFPE) == ("framework_error", "native-crash-reported")


def test_paddle_s_other_crash_signals_and_the_line_under_them_read_the_same() -> None:
    # the same handler's words for a segfault, and the signal line it prints under the sentence
    assert reason_of("FatalError: `Segmentation fault` is detected by the operating system.") == "framework_error"
    assert reason_of("SIGFPE (@0x7d670da977e7) received by PID 1") == "framework_error"
    assert reason_of("  SIGSEGV received by PID 1") == "framework_error"


def test_a_termination_signal_and_prose_are_not_a_crash() -> None:
    # SIGTERM comes from outside the process: the handler's sentence for it is no crash
    assert reason_of("FatalError: `Termination signal` is detected by the operating system.") == "unknown"
    # the same words in prose about a device
    assert reason_of("The board is detected by the operating system (via `lspci`).") == "unknown"
    # the handler's sentence after a CUDA allocation failure stays the allocation's (the earlier, specific error)
    assert (
        reason_of(
            "ResourceExhaustedError: Out of memory error on GPU 0. Cannot allocate 1.5GB memory on GPU 0\n"
            "FatalError: `Segmentation fault` is detected by the operating system."
        )
        == "gpu_oom"
    )


# ---------------------------------------------------------------- the traceback torchrun's summary quotes

# QwenAudio/CosyVoice#1774 (case 1665): CosyVoice2's example after the CosyVoice3 update; the error_file's
# traceback, as the report pasted it (its "***" stand for the lines the reporter cut).
_COSYVOICE_ROOT_CAUSE = r"""
E0107 14:20:19.551000 2210 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 2251) of binary: /opt/conda/envs/cosyvoice/bin/python
Traceback (most recent call last):
  File "/opt/conda/envs/cosyvoice/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
cosyvoice/bin/train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-01-07_14:20:19
  host      : tts-train-01
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 2251)
  error_file: /tmp/torchelastic_x1k2/none_a8/attempt_0/0/error.json
  traceback : Traceback (most recent call last):
    ***
    File "***/cosyvoice/llm/llm.py", line 341, in prepare_lm_input_target
      this_lm_target = torch.tensor([IGNORE_ID] * (1 + instruct_token_len[i] + text_token_len[i]) + speech_token[i].tolist() + [self.eos_token])
  TypeError: 'NoneType' object is not subscriptable
============================================================
"""


def test_the_summary_s_quoted_traceback_is_the_rank_s_exception() -> None:
    assert reason_and_rule(_COSYVOICE_ROOT_CAUSE) == ("script_error", "exception-TypeError")


def test_the_quoted_traceback_s_last_frame_still_decides() -> None:
    # the same TypeError raised in torch's own frame is torch's
    inside_torch = _COSYVOICE_ROOT_CAUSE.replace(
        'File "***/cosyvoice/llm/llm.py", line 341, in prepare_lm_input_target',
        'File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl',
    )
    assert reason_of(inside_torch) == "framework_error"


def test_a_summary_without_a_quoted_traceback_says_no_more_than_before() -> None:
    # no error_file: the summary points at the docs and knows only the exit code
    bare = _COSYVOICE_ROOT_CAUSE.split("  error_file:")[0] + (
        "  error_file: <N/A>\n  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        "============================================================\n"
    )
    assert reason_of(bare) == "unknown"
    # a signal the summary quotes instead of a traceback stays the launcher's segfault
    signal = bare.replace(
        "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "Signal 11 (SIGSEGV) received by PID 2251",
    ).replace("exitcode  : 1", "exitcode  : -11")
    assert reason_of(signal) == "framework_error"


# ---------------------------------------------------------------- the interpreter's IndexError sentence, unnamed

# voice-cloning-app/Voice-Cloning-App#24 (case 1684): the app's trainer reports only the exception's message.
_VOICE_CLONING_APP = r"""
Loading model...
Loaded pretrained model
Loading data...
Loaded 1 training samples and 0 validation samples
Starting training...
list index out of range
"""


def test_an_unnamed_index_error_sentence_is_the_caller_s() -> None:
    assert reason_and_rule(_VOICE_CLONING_APP) == ("script_error", "python-value-message-unnamed")
    assert reason_of("ERROR:root:tuple index out of range") == "script_error"


def test_torch_s_index_errors_are_not_the_interpreter_s_sentence() -> None:
    # torch's embedding lookup names no Python sequence: not this rule's
    assert reason_of("index out of range in self") == "unknown"
    # a named IndexError is left to its traceback's last frame, here torch's DataLoader
    assert (
        reason_of(
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.10/site-packages/torch/utils/data/_utils/fetch.py", line 52, in <listcomp>\n'
            "    data = [self.dataset[idx] for idx in possibly_batched_index]\n"
            "IndexError: list index out of range"
        )
        == "framework_error"
    )
    # a CUDA kernel's bounds assertion stays the device-side assert's
    assert (
        reason_of(
            '../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [56,0,0], thread: [64,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index out of bounds"` failed.'
        )
        == "framework_error"
    )
