"""Classes of misses from issue 19's twenty-second round (corpus cases 1660-1686: speech and audio training
recipes: WeNet, Whisper fine-tuning repositories, CosyVoice, SpeechBrain, HiFi-GAN and WaveGlow, audiolm-pytorch,
PaddleSpeech, an EnCodec trainer, a MusicGen trainer, Bert-VITS2, MockingBird, DiffSinger, Real-Time-Voice-Cloning,
Lhotse in NeMo): PaddlePaddle's own failure signal handler ("FatalError: `Erroneous arithmetic operation` is
detected by the operating system."), a native crash only the handler reports. Error messages are verbatim from the
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
