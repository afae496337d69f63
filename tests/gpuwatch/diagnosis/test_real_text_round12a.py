"""Classes of misses from issue 19's twelfth round, batch A (corpus cases 1072-1089: distributed-training
infrastructure and LLM fine-tuning frameworks): a segfault known only by the shell's status 139 in Python's
words, a layer input of the wrong shape handed to torch by a framework's own code, and a trainer that refuses
the launch and names the launcher to use. Error messages are verbatim from the public reports named in each
test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- the shell's status for a fatal signal


# bytedance/byteps#222 (case 1078): bpslaunch's worker threads re-raise the child's status, 128 + SIGSEGV.
_BYTEPS_139 = """
BytePS launching worker
Exception in thread Thread-2:
Traceback (most recent call last):
  File "/home/ubuntu/anaconda3/envs/mx_byteps/lib/python3.6/threading.py", line 916, in _bootstrap_inner
    self.run()
  File "/home/ubuntu/anaconda3/envs/mx_byteps/lib/python3.6/threading.py", line 864, in run
    self._target(*self._args, **self._kwargs)
  File "/home/ubuntu/anaconda3/envs/mx_byteps/bin/bpslaunch", line 47, in worker
    subprocess.check_call(command, env=my_env, stdout=sys.stdout, stderr=sys.stderr, shell=True)
  File "/home/ubuntu/anaconda3/envs/mx_byteps/lib/python3.6/subprocess.py", line 311, in check_call
    raise CalledProcessError(retcode, cmd)
subprocess.CalledProcessError: Command 'python byteps/example/mxnet/train_imagenet_byteps.py --benchmark 1 --batch-size=32' returned non-zero exit status 139.
"""


def test_exit_status_139_is_a_segfault_the_launcher_reports() -> None:
    assert reason_and_rule(_BYTEPS_139) == ("framework_error", "segfault-in-text")
    # the same status in other launchers' words
    assert reason_of("Process finished with exit code 139") == "framework_error"
    assert reason_of("ERROR: job step exited with status 139") == "framework_error"
    assert (
        reason_of("[ERROR] [launch.py:321:sigkill_handler] python train.py exits with return code = 139")
        == "framework_error"
    )


def test_exit_status_of_sigill_and_sigfpe_are_native_crashes_but_sigabrt_is_not_read() -> None:
    line = "subprocess.CalledProcessError: Command 'python train.py' returned non-zero exit status {}."
    assert reason_and_rule(line.format(132)) == ("framework_error", "native-crash-reported")
    assert reason_and_rule(line.format(136)) == ("framework_error", "native-crash-reported")
    # 134 (SIGABRT) is what NCCL's watchdog leaves behind, as torchrun's -6: not read as a crash here
    assert reason_and_rule(line.format(134))[1] != "native-crash-reported"
    # a kill stays a kill, and other numbers are not signals
    assert reason_of(line.format(137)) == "host_oom"
    assert reason_and_rule(line.format(1139))[1] not in ("segfault-in-text", "native-crash-reported")


# ---------------------------------------------------------------- a layer's input shape, by its caller


# artidoro/qlora#12 (case 1086): under ZeRO the LoRA layer's flattened weight reaches F.linear; the op's
# caller is peft's own code.
_QLORA_MAT1_MAT2 = """
File "/export/home2/fangkai/anaconda3/envs/torch2.0/lib/python3.9/site-packages/transformers-4.30.0.dev0-py3.9.egg/transformers/models/llama/modeling_llama.py", line 194, in forward
    query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
File "/export/home2/fangkai/anaconda3/envs/torch2.0/lib/python3.9/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl
    return forward_call(*args, **kwargs)
File "/export/home2/fangkai/anaconda3/envs/torch2.0/lib/python3.9/site-packages/peft/tuners/lora.py", line 348, in forward
    result = F.linear(x, transpose(self.weight, self.fan_in_fan_out), bias=self.bias)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (44x6656 and 1x22151168)
"""


def test_layer_input_shape_called_by_a_frameworks_code_is_the_frameworks() -> None:
    assert reason_and_rule(_QLORA_MAT1_MAT2) == ("framework_error", "layer-input-shape-in-framework")
    # torch's own frames after the framework's are passed over: the caller is still peft's
    with_torch_frame = _QLORA_MAT1_MAT2.replace(
        "RuntimeError:",
        '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/linear.py", line 114, in forward\n'
        "    return F.linear(input, self.weight, self.bias)\nRuntimeError:",
    )
    assert reason_of(with_torch_frame) == "framework_error"


def test_layer_input_shape_called_by_the_model_stays_the_scripts() -> None:
    # the same op called from the script's own model, through torch's module machinery
    text = """
Traceback (most recent call last):
  File "/home/user/project/train.py", line 88, in <module>
    out = model(x)
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl
    return forward_call(*args, **kwargs)
  File "/home/user/project/model.py", line 31, in forward
    return self.fc(x)
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl
    return forward_call(*args, **kwargs)
  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/linear.py", line 114, in forward
    return F.linear(input, self.weight, self.bias)
RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x2048 and 512x10)
"""
    assert reason_and_rule(text) == ("script_error", "layer-input-shape")
    # an application installed as a package is no framework
    assert (
        reason_of(text.replace("/home/user/project/model.py", "/opt/conda/lib/python3.10/site-packages/myapp/model.py"))
        == "script_error"
    )
    # and with no frame the message alone stays the script's
    assert reason_of("RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x2048 and 512x10)") == "script_error"


# ---------------------------------------------------------------- a trainer that names its launcher


# hiyouga/LlamaFactory#6766 (case 1088): src/train.py run with plain python on a multi-GPU machine.
_LLAMAFACTORY_LAUNCH = """
  File "/mnt/remote-data/zby/LLaMA-Factory-main/src/llamafactory/train/tuner.py", line 52, in _training_function
    model_args, data_args, training_args, finetuning_args, generating_args = get_train_args(args)
                                                                             ^^^^^^^^^^^^^^^^^^^^
  File "/mnt/remote-data/zby/LLaMA-Factory-main/src/llamafactory/hparams/parser.py", line 222, in get_train_args
    raise ValueError("Please launch distributed training with `llamafactory-cli` or `torchrun`.")
ValueError: Please launch distributed training with `llamafactory-cli` or `torchrun`.
"""


def test_trainer_naming_the_launcher_to_use_is_the_launch() -> None:
    assert reason_and_rule(_LLAMAFACTORY_LAUNCH) == ("argument_error", "launch-gpu-setup")
    # other launchers named the same way
    assert reason_of("RuntimeError: Please launch this script with `accelerate launch`.") == "argument_error"
    assert reason_of("AssertionError: please run with torchrun for multi-GPU training") == "argument_error"
    assert (
        reason_of("ValueError: Please launch the training via python -m torch.distributed.launch") == "argument_error"
    )
    # advice that names no launcher is not the launch
    assert (
        reason_of("RuntimeError: Please run with CUDA_LAUNCH_BLOCKING=1 for a precise stack trace") != "argument_error"
    )
