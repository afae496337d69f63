"""Classes of misses from issue 19's twenty-seventh round (corpus cases 1822-1827, speech recognition: NeMo, SALMONN,
wav2letter, Kaldi through speech-to-phrase, pocketsphinx; 1842-1850, vision foundation models: MoCo v3, open_clip,
SAM 2, MAE, DINOv2, InternImage, CLIP): model files that do not parse in the words of the library reading them
(sentencepiece's tokenizer model, OpenFst's), and the C library's assertion as macOS and the BSDs word it. Error
messages are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# bytedance/SALMONN#50 (case 1823): the Vicuna tokenizer.model is a Git LFS pointer.
_SENTENCEPIECE_PARSE = """
$ python3 train.py --cfg-path configs/config.yaml
RuntimeError: Internal: src/sentencepiece_processor.cc(1101) [model_proto->ParseFromArray(serialized.data(), serialized.size())]
"""

# OHF-Voice/speech-to-phrase#80 (case 1826): phonetisaurus cannot read its g2p model.
_FST_READ_FAILED = """
  File "/usr/src/.venv/lib/python3.11/site-packages/speech_to_phrase/speech_tools.py", line 94, in async_run
    raise RuntimeError(error_text)
RuntimeError: Unexpected error running command /usr/src/tools/phonetisaurus ['--model=/data/models/en_US-rhasspy/g2p.fst', '--wordlist=/tmp/tmpdysf976j.txt']: ERROR: VectorFst::Read: Read failed: /data/models/en_US-rhasspy/g2p.fst
terminate called after throwing an instance of 'std::exception'
  what():  std::exception
"""


def test_a_model_file_that_does_not_parse_is_a_checkpoint_load_error() -> None:
    assert reason_and_rule(_SENTENCEPIECE_PARSE) == ("checkpoint_load_error", "state-dict")
    assert reason_and_rule(_FST_READ_FAILED) == ("checkpoint_load_error", "state-dict")


# watsonbox/sphinxtrain-ruby#3 (case 1827): pocketsphinx's assert on macOS, and the shell's SIGABRT.
_BSD_ASSERT = """
SAY: Author of the danger trail, Philip Steels, etc.
Press ENTER to continue

Assertion failed: (hmm_frame(&hmm->hmm) == frame_idx), function eval_nonroot_chan, file ngram_search_fwdtree.c, line 640.
Abort trap: 6
"""


def test_the_c_library_s_assertion_in_bsd_words_is_a_native_abort() -> None:
    assert reason_and_rule(_BSD_ASSERT) == ("framework_error", "native-abort")


def test_prose_that_says_an_assertion_failed_is_not_one() -> None:
    assert (
        reason_of("INFO Assertion failed: see the docs for the check, function names differ\nstep 5 loss 1.2")
        == "unknown"
    )
