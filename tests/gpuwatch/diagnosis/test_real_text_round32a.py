"""Classes of misses from issue 19's thirty-second round (corpus cases 2022-2034, few-step diffusion generators and
their distillation: consistency models, img2img-turbo, DMD2, RectifID, LCM front-ends; 2042-2061, on-device and edge
training: ONNX Runtime Training, Core ML, OpenVINO Training Extensions, TF model optimization, jetson-inference,
sparseml, TensorFlow.js): macOS's C++ runtime ending a process, the shell's crash line as a user retypes it,
JavaScript's uncaught errors, ORTModule's extensions never built, and a checkpoint loader whose name has a suffix
(OpenVINO Training Extensions as a framework). Error messages are verbatim from the public reports named in each
test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# apple/coremltools#490 (case 2047).
_LIBCXXABI = """
2020-01-08 10:14:07.551 MNISTUpdatable[1423:90331] starting update task
libc++abi.dylib: terminating with uncaught exception of type std::runtime_error: BNNS error
"""

# dusty-nv/jetson-inference#1094 (case 2053): the report types the shell's line in lower case.
_ILLEGAL_LOWER = """
$ python3 train_ssd.py --data=data/object --model-dir=models/object --batch-size=2 --epochs=30
illegal instruction (core dumped)
"""

# tensorflow/tfjs#6358 (case 2061).
_JS_UNCAUGHT = """
index.js:88 Uncaught (in promise) TypeError: Cannot read properties of undefined (reading 'length')
    at flatten (index.js:88:26)
    at train (index.js:48:23)
    at HTMLButtonElement.onclick (index.html:14:42)
"""

# huggingface/optimum via microsoft/onnxruntime#16066 (case 2043).
_ORTMODULE = """
$ python run_ner_ort.py
ORTModuleInitException: ORTModule's extensions were not detected at '/local_disk0/envs/pythonEnv/lib/python3.9/site-packages/onnxruntime/training/ortmodule/torch_cpp_extensions' folder. Run `python -m torch_ort.configure` before using `ORTModule` frontend.
"""

# open-edge-platform/geti#3311 (case 2048): OTX run from its checkout.
_OTX_LOAD = """
Traceback (most recent call last):
  File "/mnt/sdb/workarea/otx/src/otx/cli/cli.py", line 634, in run
    fn(**fn_kwargs)
  File "/mnt/sdb/workarea/otx/src/otx/engine/engine.py", line 265, in train
    self.model.load_state_dict_incrementally(ckpt)
  File "/mnt/sdb/workarea/otx/src/otx/core/model/base.py", line 369, in load_state_dict_incrementally
    raise ValueError(msg, ckpt_label_info)
ValueError: ('Checkpoint should have `label_info`.', None)
"""


def test_macos_c_plus_plus_runtime_ending_the_process_is_a_native_abort() -> None:
    assert reason_and_rule(_LIBCXXABI) == ("framework_error", "cxx-terminate")


def test_the_shell_s_crash_line_retyped_in_lower_case_is_still_one() -> None:
    assert reason_of(_ILLEGAL_LOWER) == "framework_error"


def test_javascript_s_uncaught_error_is_the_page_s_code() -> None:
    assert reason_and_rule(_JS_UNCAUGHT) == ("script_error", "js-uncaught-error")


def test_ortmodule_s_extensions_never_built_is_an_import_error() -> None:
    assert reason_and_rule(_ORTMODULE) == ("import_error", "extension-build-failed")


def test_a_framework_s_loader_with_a_suffixed_name_refusing_a_checkpoint_is_the_checkpoint_s() -> None:
    assert reason_of(_OTX_LOAD) == "checkpoint_load_error"
