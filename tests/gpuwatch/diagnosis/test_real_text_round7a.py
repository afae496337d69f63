"""Classes of misses from issue 19's seventh round, batch A (corpus cases 705-744): code bugs raised in an
installed application's own package, a library refusing the model or value it was given, Lightning's
refusal of a Trainer call the module has no method for, a native extension whose guarded import failed,
a CPU tensor handed to a CUDA extension, and a path of the wrong kind (ENOTDIR, in TensorFlow's words
too). Error messages are verbatim from the public reports named in each test, or the emitter's own
wording; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


def _traceback(last_frame: str, exception: str) -> str:
    return f"""
Traceback (most recent call last):
  File "/home/u/proj/train.py", line 128, in <module>
    main()
  File "{last_frame}", line 64, in get_loss
    data, target = sample
{exception}
"""


# ---------------------------------------------------------------- code bugs in an installed application


@pytest.mark.parametrize(
    ("frame", "exception"),
    [
        # labmlai/annotated_deep_learning_paper_implementations#166 (case 709)
        (
            "/home/p/.local/lib/python3.9/site-packages/labml_nn/neox/utils/trainer.py",
            "TypeError: cannot unpack non-iterable NoneType object",
        ),
        # lucidrains/stylegan2-pytorch#149 (case 724)
        ("/opt/conda/lib/python3.8/site-packages/stylegan2_pytorch/cli.py", "NameError: name 'seed' is not defined"),
        (
            "/usr/lib/python3/dist-packages/some_app/run.py",
            "UnboundLocalError: local variable 'g_loss' referenced before assignment",
        ),
        (
            "/venv/lib/python3.12/site-packages/some_app/run.py",
            "UnboundLocalError: cannot access local variable 'g_loss' where it is not associated with a value",
        ),
        ("/venv/lib/python3.10/site-packages/some_app/data.py", "TypeError: 'NoneType' object is not subscriptable"),
        (
            "/venv/lib/python3.10/site-packages/some_app/data.py",
            "AttributeError: 'NoneType' object has no attribute 'shape'",
        ),
        ("/venv/lib/python3.10/site-packages/some_app/data.py", "TypeError: object of type 'NoneType' has no len()"),
        (
            "/venv/lib/python3.10/site-packages/some_app/data.py",
            "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",
        ),
        (
            "/venv/lib/python3.10/site-packages/some_app/data.py",
            "TypeError: argument of type 'NoneType' is not iterable",
        ),
    ],
)
def test_a_code_bug_in_an_installed_application_is_a_script_error(frame: str, exception: str) -> None:
    reason, _ = reason_and_rule(_traceback(frame, exception))
    assert reason == "script_error"


@pytest.mark.parametrize(
    "frame",
    [
        "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py",
        "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py",
        "/opt/conda/lib/python3.10/site-packages/transformers/trainer.py",
        "/opt/conda/lib/python3.10/site-packages/pytorch_lightning/trainer/trainer.py",
    ],
)
def test_the_same_code_bug_inside_a_framework_stays_a_framework_error(frame: str) -> None:
    reason, _ = reason_and_rule(_traceback(frame, "TypeError: cannot unpack non-iterable NoneType object"))
    assert reason == "framework_error"


def test_an_other_exception_in_an_installed_package_is_still_judged_by_where_it_was_raised() -> None:
    """Only the interpreter's own code-bug wordings move: a package's own ValueError stays as before."""
    frame = "/venv/lib/python3.10/site-packages/some_lib/core.py"
    assert reason_and_rule(_traceback(frame, "ValueError: bad header in block 3"))[0] == "framework_error"


def test_the_spawned_stylegan2_cli_nameerror_is_a_script_error() -> None:
    """lucidrains/stylegan2-pytorch#149: mp.spawn re-raises the rank's NameError from the CLI's package."""
    text = """
Traceback (most recent call last):
  File "/envs/augment/lib/python3.8/site-packages/torch/multiprocessing/spawn.py", line 119, in join
    raise Exception(msg)
Exception:

-- Process 0 terminated with the following error:
Traceback (most recent call last):
  File "/envs/augment/lib/python3.8/site-packages/torch/multiprocessing/spawn.py", line 20, in _wrap
    fn(i, *args)
  File "/envs/augment/lib/python3.8/site-packages/stylegan2_pytorch/cli.py", line 35, in run_training
    model = Trainer(**model_args)
NameError: name 'seed' is not defined
"""
    assert reason_and_rule(text)[0] == "script_error"


# ---------------------------------------------------------------- a library refusing what it was given


@pytest.mark.parametrize(
    "line",
    [
        # deepspeedai/DeepSpeed-MII#123 (case 720)
        "AssertionError: text-generation only supports ['distilgpt2', 'gpt2-large', 'gpt2-medium', 'gpt2-xl', 'gpt2', 'microsoft/DialogRPT-human-vs-rand', 'EleutherAI/gpt-neo-125M']",
        "ValueError: fill-mask only supports one of ['bert-base-uncased', 'roberta-base']",
        # transformers' pipeline(): check_task
        "KeyError: \"Unknown task text-generations, available tasks are ['audio-classification', 'text-generation']\"",
        # vLLM's model registry
        "ValueError: Model architectures ['MyForCausalLM'] are not supported for now. Supported architectures: ['LlamaForCausalLM']",
        "ValueError: optimizer must be one of ['adamw', 'sgd'], got 'adam'",
        # the same refusal through vLLM's pydantic config (vllm-project/vllm issues)
        "Value error, Model architectures ['DeepseekOCRForCausalLM'] are not supported for now. Supported architectures: dict_keys(['ApertusForCausalLM', 'AquilaModel'])",
    ],
)
def test_a_library_refusing_the_model_or_value_it_was_given_is_an_argument_error(line: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "/opt/conda/lib/python3.8/site-packages/mii/utils.py", line 134, in check_if_task_and_model_is_valid
    assert model_name in valid_task_models, f"{{task_name}} only supports {{valid_task_models}}"
{line}
"""
    assert reason_and_rule(text) == ("argument_error", "library-refuses-value")


def test_a_hardware_only_supports_is_not_a_refused_value() -> None:
    assert (
        reason_and_rule("RuntimeError: FlashAttention only supports Ampere GPUs or newer.")[1]
        != "library-refuses-value"
    )


# ---------------------------------------------------------------- Lightning: no method for the Trainer's call


@pytest.mark.parametrize(
    "line",
    [
        # rinongal/textual_inversion#36 (case 734), backticks as the report has them and as Lightning writes them
        "pytorch_lightning.utilities.exceptions.MisconfigurationException: No 'test_dataloader()' method defined to run 'Trainer.test'.",
        "lightning.fabric.utilities.exceptions.MisconfigurationException: No `test_step()` method defined to run `Trainer.test`.",
        "pytorch_lightning.utilities.exceptions.MisconfigurationException: No `training_step()` method defined. Lightning `Trainer` expects as minimum a `training_step()`, `train_dataloader()` and `configure_optimizers()` to be defined.",
        "pytorch_lightning.utilities.exceptions.MisconfigurationException: `val_dataloader` must be implemented to be used with the Lightning Trainer",
    ],
)
def test_lightning_refusing_a_call_the_module_has_no_method_for_is_a_script_error(line: str) -> None:
    text = f"""
Epoch 0: 100%|██████████| 6000/6000 [1:12:43<00:00,  1.38it/s, loss=0.0812, v_num=0]
Traceback (most recent call last):
  File "main.py", line 830, in <module>
    trainer.test(model, data)
  File "/envs/ldm/lib/python3.8/site-packages/pytorch_lightning/trainer/configuration_validator.py", line 95, in __verify_eval_loop_configuration
    raise MisconfigurationException(
{line}
"""
    assert reason_and_rule(text) == ("script_error", "lightning-module-lacks-method")


# ---------------------------------------------------------------- a native extension that never imported


@pytest.mark.parametrize(
    "line",
    [
        # MzeroMiko/VMamba#124 (case 738)
        "NameError: name 'selective_scan_cuda' is not defined. Did you mean: 'selective_scan_cuda_core'?",
        "NameError: name 'causal_conv1d_cuda' is not defined",
        "NameError: name '_C' is not defined",
        "NameError: name 'deform_conv_ext' is not defined",
        "NameError: global name 'roi_align_cpp' is not defined",
    ],
)
def test_a_nameerror_naming_a_native_extension_is_an_import_error(line: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "/data/VMamba/classification/models/csms6s.py", line 234, in forward
    out, x, *rest = selective_scan_cuda.fwd(u, delta, A, B, C, D, None, delta_bias, delta_softplus)
{line}
"""
    assert reason_and_rule(text)[0] == "import_error"


@pytest.mark.parametrize("name", ["use_cuda", "is_cuda", "args_cuda", "x_cuda", "num_cuda_devices", "file_ext"])
def test_a_nameerror_naming_a_flag_is_still_a_script_error(name: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "train.py", line 12, in <module>
    model = model.cuda() if {name} else model
NameError: name '{name}' is not defined
"""
    assert reason_and_rule(text)[0] == "script_error"


# ---------------------------------------------------------------- a CPU tensor handed to a CUDA extension


@pytest.mark.parametrize(
    "line",
    [
        # HZAI-ZJNU/Mamba-YOLO#13 (case 739): TORCH_CHECK(u.is_cuda())
        "RuntimeError: Expected u.is_cuda() to be true, but got false.  (Could this error message be improved?  If so, please report an enhancement request to PyTorch.)",
        "RuntimeError: Expected x.device().is_cuda() to be true, but got false.",
        "RuntimeError: input must be a CUDA tensor",
        "RuntimeError: q must be on CUDA",
    ],
)
def test_a_cpu_tensor_given_to_a_cuda_extension_is_a_script_error(line: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "/home/u/Mamba-YOLO/ultralytics/nn/modules/common_utils_mbyolo.py", line 128, in forward
    out, x, *rest = selective_scan_cuda_core.fwd(u.contiguous(), delta, A, B, C, D, delta_bias, delta_softplus, 1)
{line}
"""
    assert reason_and_rule(text) == ("script_error", "cuda-extension-got-cpu-tensor")


# ---------------------------------------------------------------- a path of the wrong kind


@pytest.mark.parametrize(
    "line",
    [
        # salesforce/ctrl#40 (case 741): TensorFlow's status for ENOTDIR
        "ERROR:tensorflow:Error recorded from training_loop: moby_dick.txt.tfrecords/graph.pbtxt.tmp1a94ee91758c42f88fddd51c196b3dbe; Not a directory",
        "tensorflow.python.framework.errors_impl.FailedPreconditionError: /data/ckpt/model.ckpt-0_temp/part-00000-of-00001.data-00000-of-00001.tempstate; Not a directory",
        "tensorflow.python.framework.errors_impl.NotFoundError: /data/train.tfrecord; No such file or directory",
        "NotADirectoryError: [Errno 20] Not a directory: 'data/train.jsonl/cache'",
        "IsADirectoryError: [Errno 21] Is a directory: 'checkpoints/'",
        "OSError: [Errno 20] Not a directory: '/mnt/data/images.zip/0001.png'",
        "mkdir: cannot create directory 'out/model.pt/ckpt': Not a directory",
    ],
)
def test_a_path_of_the_wrong_kind_is_file_not_found(line: str) -> None:
    assert reason_and_rule(line)[0] == "file_not_found"
