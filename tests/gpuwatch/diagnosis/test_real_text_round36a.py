"""Classes of misses from issue 19's thirty-sixth round (corpus cases 2182-2191, EEG, ECG and sleep-staging
training: fairseq-signals, U-Time, sleepkit, EEG-To-Text, ecg-qa, FBCNet, MOABB; 2202-2210, speculative-decoding
drafts and knowledge distillation: SpecForge, EAGLE, MiniLLM, DeiT, minimind, mobile-yolov5, PaddleOCR, BAM,
DIODE), with two older misses of the same class: a traceback cut after its last frame's assert statement
(cases 1904 and 1128), an assertion that a path exists, a crash handler's banner, a trainer that does not
support DDP, a recording that does not load, a refusal that names the options to use, and torch's negative
dimension. Error messages are verbatim from the public reports named in each test; hosts, paths and pids may
be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# tum-vision/DEVO#19 (case 1904): the report keeps the frame and its assert, not the exception.
_CUT_PATH_ASSERT = """
$ python train.py --evs --datapath "../DEVO/thirdparty/tartanair_tools/downloaded/datasets/abandonedfactory_backup" --name "train_test"
File "DEVO/train.py", line 332, in assert_config
    assert os.path.isfile(args.fgraph_pickle)
"""

# McGregorWwww/UCTransNet#39 (case 1128): PyCharm's marker between the frame and its statement.
_CUT_ASSERT_PYCHARM = """
  File "/mnt/d/Python_Project/UCtransNet/utils.py", line 41, in forward
python-BaseException
    assert(logit.shape==truth.shape)
"""

# sgl-project/SpecForge#539 (case 2202).
_SEGFAULT_BANNER = """
!!!!!!! Segfault encountered !!!!!!!
  File "<unknown>", line 0, in _PyEval_EvalFrameDefault
  File "<unknown>", line 0, in _PyFunction_Vectorcall
"""

# Syencil/mobile-yolov5-pruning-distillation#79 (case 2207).
_NO_DDP = "$ python train.py --type domvocs\nNotImplementedError: Distillation do not support DDP!\n"

# perslev/U-Time#50 (case 2191), #5 (case 2189), #21 (case 2190).
_STUDY = "utime.errors.CouldNotLoadError: Could not load sleep study SC4411E0. Please refer to the above traceback.\n"
_CHANNEL = "utime.errors.ChannelNotFoundError: Unexpected channel loading error. Should have loaded 1 channels (['EEG Fpz-Cz']), but the PSG array has shape (7926000, 2). There might be an error in the code. Please rais an issue on GitHub.\n"
_USE_OPTIONS = "NotImplementedError: The 'eager' data loading queue currently does not support datasets with the 'load_time_channel_sampling_groups' or 'access_time_channel_sampling_groups' attributes set. If you want to train using random channel combinations, either pre-process the data using the 'ut preprocess' command and then re-run training using 'ut train --preprocessed', or run training with the limitation queue loader using the '--train_queue_type limitation' command.\n"

# NVlabs/DIODE#19 (case 2210).
_NEGATIVE = "$ python distill.py\nTrying to create tensor with negative dimension -1682796288: [-1682796288]\n"


def test_a_traceback_cut_after_an_assert_statement_is_that_assertion() -> None:
    assert reason_and_rule(_CUT_PATH_ASSERT) == ("file_not_found", "assert-path-exists")
    assert reason_of(_CUT_ASSERT_PYCHARM) == "script_error"
    # the same statement with its exception, and a check that refuses to overwrite, which is no missing path
    with_exception = _CUT_PATH_ASSERT + "AssertionError\n"
    assert reason_and_rule(with_exception) == ("file_not_found", "assert-path-exists")
    overwrite = _CUT_PATH_ASSERT.replace("assert os.path.isfile", "assert not os.path.isfile")
    assert reason_of(overwrite) != "file_not_found"


@pytest.mark.parametrize(
    "statement",
    ["assert os.path.exists(cfg.data_root)", "assert Path(args.ckpt).is_file()", "assert (os.path.isdir(root))"],
)
def test_assertions_that_a_path_exists(statement: str) -> None:
    text = (
        f'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n    {statement}\nAssertionError\n'
    )
    assert reason_and_rule(text) == ("file_not_found", "assert-path-exists")


def test_a_crash_handler_s_banner_is_a_native_crash() -> None:
    assert reason_and_rule(_SEGFAULT_BANNER) == ("framework_error", "segfault-in-text")


def test_a_trainer_that_does_not_support_its_distributed_launch() -> None:
    assert reason_and_rule(_NO_DDP) == ("argument_error", "launch-gpu-setup")
    assert reason_of("RuntimeError: This model does not support multi-GPU training\n") == "argument_error"


def test_a_recording_that_does_not_load_is_the_data() -> None:
    assert reason_and_rule(_STUDY) == ("dataloader_error", "input-pipeline-data")
    assert reason_and_rule(_CHANNEL) == ("dataloader_error", "input-pipeline-data")


def test_a_refusal_naming_the_options_to_use_is_the_launch() -> None:
    assert reason_and_rule(_USE_OPTIONS) == ("argument_error", "unsupported-option-combination")
    # a NotImplementedError that names no option stays the code's
    assert (
        reason_of("NotImplementedError: The 'eager' data loading queue currently does not support this dataset.\n")
        != "argument_error"
    )


def test_torch_s_negative_dimension_is_the_framework_s() -> None:
    assert reason_and_rule(_NEGATIVE) == ("framework_error", "tensor-negative-dimension")
