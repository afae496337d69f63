"""The emitter-native catalogue: wordings read where their emitters raise or print them.

Sources read (rules.toml, section "emitter-native"): python/cpython Python/ceval.c, Objects/object.c,
Objects/typeobject.c, Objects/abstract.c, Objects/longobject.c, Objects/floatobject.c, Objects/dictobject.c,
Objects/setobject.c, Objects/listobject.c, Objects/unicodeobject.c (the interpreter's exception messages, quoted
without the exception's name); gcc-mirror/gcc libstdc++-v3/libsupc++/pure.cc; google/glog src/logging.cc;
abseil/abseil-cpp absl/debugging/failure_signal_handler.cc; rust-lang/rust library/std/src/panicking.rs;
llvm/llvm-project llvm/lib/Support/ErrorHandling.cpp; glibc's strsignal strings as the shells print them.
Each entry is rendered as its emitter prints it inside a short training-log excerpt; the entries the section
leaves out (SIGTERM, SIGKILL, SIGABRT's status, "module ... has no attribute") are asserted not to be read as a
crash or a script error by it.
"""

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# A run that got going before it failed: the lines before every rendered entry.
_PREAMBLE = """\
2024-05-02 10:14:03 INFO  Loading config configs/base.yaml
2024-05-02 10:14:09 INFO  world_size=1, device=cuda:0, batch_size=32
2024-05-02 10:14:31 INFO  epoch 0 step 100/5000 loss 2.3141 lr 1.0e-04
2024-05-02 10:15:02 INFO  epoch 0 step 200/5000 loss 1.9876 lr 1.0e-04
"""

# CPython's messages, as a handler or a logger quotes them without the exception's name (str(exc)).
INTERPRETER = {
    "positional arguments": "forward() takes 2 positional arguments but 3 were given",
    "positional, method qualname": "LitModel.training_step() takes 3 positional arguments but 4 were given",
    "positional, kw-only": (
        "f() takes 1 positional argument but 2 positional arguments (and 1 keyword-only argument) were given"
    ),
    "from-to positional": "build_model() takes from 1 to 2 positional arguments but 3 were given",
    "missing argument": "collate_fn() missing 1 required positional argument: 'batch'",
    "missing kw-only": "Trainer.fit() missing 1 required keyword-only argument: 'datamodule'",
    "unexpected keyword": "Trainer.__init__() got an unexpected keyword argument 'tokenizer'",
    "multiple values": "forward() got multiple values for argument 'attention_mask'",
    "lambda": "<lambda>() takes 1 positional argument but 2 were given",
    "takes no arguments": "Net() takes no arguments",
    "builtin one argument": "len() takes exactly one argument (2 given)",
    "object init": "Block.__init__() takes exactly one argument (the instance to initialize)",
    "name not defined": "name 'val_loader' is not defined",
    "unbound local 3.11": "cannot access local variable 'loss' where it is not associated with a value",
    "unbound local 3.10": "local variable 'best_acc' referenced before assignment",
    "unbound free": "cannot access free variable 'step' where it is not associated with a value in enclosing scope",
    "no attribute": "'NoneType' object has no attribute 'shape'",
    "no attribute, dotted type": "'torch.device' object has no attribute 'index_put'",
    "type object no attribute": "type object 'Config' has no attribute 'warmup_steps'",
    "division by zero": "division by zero",
    "integer division": "integer division or modulo by zero",
    "integer modulo": "integer modulo by zero",
    "float division": "float division by zero",
    "float floor division": "float floor division by zero",
    "float modulo 3.12": "float modulo by zero",
    "int literal": "invalid literal for int() with base 10: 'epoch_final'",
    "float conversion": "could not convert string to float: 'n/a'",
    "item assignment": "'tuple' object does not support item assignment",
    "unhashable": "unhashable type: 'list'",
    "comparison": "'<' not supported between instances of 'NoneType' and 'float'",
    "sequence multiply": "can't multiply sequence by non-int of type 'float'",
    "unary operand": "bad operand type for unary -: 'str'",
    "not an integer": "'float' object cannot be interpreted as an integer",
    "containment": "argument of type 'int' is not iterable",
    "dict mutated": "dictionary changed size during iteration",
    "dict keys mutated": "dictionary keys changed during iteration",
    "set mutated": "Set changed size during iteration",
    "OrderedDict mutated": "OrderedDict mutated during iteration",
    "recursion": "maximum recursion depth exceeded while calling a Python object",
    "recursion, comparison": "maximum recursion depth exceeded in comparison",
    "empty pop": "pop from empty list",
    "list remove": "list.remove(x): x not in list",
    "list index": "'<pad>' is not in list",
    "string indices 3.11": "string indices must be integers, not 'str'",
    "format arguments": "not all arguments converted during string formatting",
    "format too few": "not enough arguments for format string",
    "path None": "expected str, bytes or os.PathLike object, not NoneType",
    "join item": "sequence item 0: expected str instance, int found",
    "slice index": "slice indices must be integers or None or have an __index__ method",
    "json": "Object of type Tensor is not JSON serializable",
}

# How a message without its name reaches a log: a logger's line, a handler's print, a bare line.
_QUOTINGS = (
    "2024-05-02 10:15:17 ERROR Training failed: {msg}",
    "{msg}",
)


@pytest.mark.parametrize("quoting", _QUOTINGS)
@pytest.mark.parametrize("message", list(INTERPRETER.values()), ids=list(INTERPRETER))
def test_an_interpreter_message_without_its_name_is_a_script_error(message: str, quoting: str) -> None:
    text = _PREAMBLE + quoting.format(msg=message) + "\n"
    reason, rule = reason_and_rule(text)
    assert (reason, rule is not None and rule.startswith("emitter-native-python-")) == ("script_error", True), rule


# Native crashes, each as its emitter prints it, with the lines that come with it.
NATIVE = {
    "pure virtual": (
        "pure virtual method called\nterminate called without an active exception\nAborted (core dumped)",
        "framework_error",
    ),
    "deleted virtual": ("deleted virtual method called", "framework_error"),
    "glog check failure trace": (
        "*** Check failure stack trace: ***\n    @     0x7f0c6d458f5d  google::LogMessage::Fail()\n"
        "    @     0x7f0c6d45b513  google::LogMessage::SendToLog()",
        "framework_error",
    ),
    "absl SIGSEGV": (
        "*** SIGSEGV received at time=1700000000 on cpu 12 ***\nPC: @     0x7f0e83fc7fb7  (unknown)  raise",
        "framework_error",
    ),
    "absl SIGFPE": ("*** SIGFPE received at time=1700000000 ***", "framework_error"),
    "absl SIGILL": ("*** SIGILL received at time=1700000000 on cpu 3 ***", "framework_error"),
    "absl SIGBUS": ("*** SIGBUS received at time=1700000000 on cpu 3 ***", "framework_error"),
    "absl SIGABRT": ("*** SIGABRT received at time=1625642815 ***", "framework_error"),
    "rust panic 1.73+": (
        "thread 'main' panicked at src/tokenizer/mod.rs:451:41:\nindex out of bounds: the len is 3 but the index is 3\n"
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
        "framework_error",
    ),
    "rust panic before 1.73": (
        "thread '<unnamed>' panicked at 'called `Option::unwrap()` on a `None` value', src/lib.rs:12:5",
        "framework_error",
    ),
    "faulthandler windows": (
        "Windows fatal exception: access violation\n\nCurrent thread 0x00002a7c (most recent call first):\n"
        '  File "C:\\envs\\sd\\lib\\site-packages\\torch\\nn\\modules\\conv.py", line 456 in _conv_forward',
        "framework_error",
    ),
    "LLVM fatal": ("LLVM ERROR: Failed to compute parent layout for slice layout.", "framework_error"),
    "LLVM out of memory": ("LLVM ERROR: out of memory\nAllocation failed", "host_oom"),
    "bash trap bare": ("Trace/breakpoint trap (core dumped)", "framework_error"),
    "bash trap job": (
        "./train.sh: line 7: 48812 Trace/breakpoint trap   (core dumped) python train.py --cfg base.yaml",
        "framework_error",
    ),
    "zsh trap": ("zsh: trace trap  python train.py", "framework_error"),
    "status -11": (
        "subprocess.CalledProcessError: Command 'python train.py' returned non-zero exit status -11.",
        "framework_error",
    ),
    "exit code -8": ("Process exit code -8", "framework_error"),
    "return code -4": ("worker 3 finished, return code: -4", "framework_error"),
    # covered by the rules before this section: rendered here so that the catalogue as a whole is checked
    "bash segfault bare": ("Segmentation fault (core dumped)", "framework_error"),
    "bash segfault job": ("[1]+  Segmentation fault      (core dumped) python train.py", "framework_error"),
    "bash FPE": ("Floating point exception (core dumped)", "framework_error"),
    "bash SIGILL": ("Illegal instruction (core dumped)", "framework_error"),
    "bash abort": ("Aborted (core dumped)", "framework_error"),
    "bash bus error": ("Bus error (core dumped)", "framework_error"),
    "bash script line": (
        "run.sh: line 12: 31337 Segmentation fault      (core dumped) python train.py",
        "framework_error",
    ),
    "zsh segfault": ("zsh: segmentation fault  python train.py", "framework_error"),
    "faulthandler SIGSEGV": (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f3e8c9fe740 (most recent call first):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/conv.py", line 456 in _conv_forward',
        "framework_error",
    ),
    "faulthandler SIGABRT": ("Fatal Python error: Aborted", "framework_error"),
    "faulthandler SIGFPE": ("Fatal Python error: Floating point exception", "framework_error"),
    "glog check failed": (
        "F1125 12:00:00.000000  1234 user_op.cpp:12] Check failed: it != end() Cannot find input\n"
        "*** Check failure stack trace: ***",
        "framework_error",
    ),
    "terminate std": (
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  bad thing\nAborted (core dumped)",
        "framework_error",
    ),
    "exit status 139": ("Error: exit status 139", "framework_error"),
    "PyCharm 139": ("Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)", "framework_error"),
    "signals SIGSEGV": (
        "subprocess.CalledProcessError: Command '['python', 'train.py']' died with <Signals.SIGSEGV: 11>.",
        "framework_error",
    ),
}


@pytest.mark.parametrize(("excerpt", "reason"), list(NATIVE.values()), ids=list(NATIVE))
def test_a_native_crash_as_its_emitter_prints_it(excerpt: str, reason: str) -> None:
    assert reason_of(_PREAMBLE + excerpt + "\n") == reason


# A specific error before the crash line stays the answer: the crash is its consequence.
@pytest.mark.parametrize(
    "crash",
    [
        "Aborted (core dumped)",
        "pure virtual method called",
        "*** SIGABRT received at time=1700000000 on cpu 2 ***",
        "*** Check failure stack trace: ***",
        "thread '<unnamed>' panicked at src/lib.rs:88:9:",
    ],
)
def test_a_cuda_error_before_a_crash_line_stays_the_cuda_error(crash: str) -> None:
    text = _PREAMBLE + (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
        f"{crash}\n"
    )
    assert reason_of(text) == "cuda_error"


@pytest.mark.parametrize(
    "crash",
    [
        "Segmentation fault (core dumped)",
        "*** SIGSEGV received at time=1700000000 on cpu 7 ***",
        "Trace/breakpoint trap",
    ],
)
def test_an_xid_before_a_segfault_stays_gpu_hardware(crash: str) -> None:
    text = (
        "[Thu May  2 10:15:40 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=48213, GPU has fallen off the bus.\n"
        + _PREAMBLE
        + crash
        + "\n"
    )
    assert reason_of(text) == "gpu_hardware"


def _traceback(last_frame: str, line: str) -> str:
    return _PREAMBLE + (
        "Traceback (most recent call last):\n"
        '  File "/home/user/project/train.py", line 88, in <module>\n'
        "    main()\n"
        f'  File "{last_frame}", line 412, in step\n'
        "    out = self.run(batch)\n"
        f"{line}\n"
    )


_FRAMEWORK_FRAME = "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/engine.py"
_SCRIPT_FRAME = "/home/user/project/model.py"


@pytest.mark.parametrize(
    "line",
    [
        "AttributeError: 'NoneType' object has no attribute 'numel'",
        "ZeroDivisionError: float division by zero",
        "RuntimeError: dictionary changed size during iteration",
        "ValueError: invalid literal for int() with base 10: 'auto'",
        "UnboundLocalError: cannot access local variable 'grads' where it is not associated with a value",
        # the message inside a named exception's own message: still the frames' to decide
        "RuntimeError: step 12 failed: 'NoneType' object has no attribute 'numel'",
        "RuntimeError: metric failed: float division by zero",
    ],
)
def test_a_named_exception_is_left_to_the_traceback_frames(line: str) -> None:
    """The section reads only the message without its name: a traceback's last frame decides whose."""
    in_framework = reason_and_rule(_traceback(_FRAMEWORK_FRAME, line))
    in_script = reason_and_rule(_traceback(_SCRIPT_FRAME, line))
    assert in_framework[0] == "framework_error"
    assert in_script[0] == "script_error"
    assert not any((rule or "").startswith("emitter-native-") for _, rule in (in_framework, in_script))


def test_a_wrapped_exception_keeps_the_engines_answer() -> None:
    """Ray's wrapper names the type it carries: the engine's answer without this section (nothing), not it."""
    line = "ray.exceptions.RayTaskError(ZeroDivisionError): ray::Worker.run() (pid=4242) float division by zero"
    assert reason_and_rule(_traceback(_FRAMEWORK_FRAME, line)) == ("unknown", None)


def test_a_named_call_mismatch_keeps_call_signature() -> None:
    line = "TypeError: forward() takes 2 positional arguments but 3 were given"
    assert reason_and_rule(_traceback(_FRAMEWORK_FRAME, line)) == ("script_error", "call-signature")


@pytest.mark.parametrize(
    "name",
    ["apex", "selective_scan_cuda", "_C"],
)
def test_an_optional_module_name_undefined_is_not_read_as_a_script_bug(name: str) -> None:
    """optional-import-name and extension-name-undefined read these as import_error when named; unnamed,
    this section leaves them out rather than contradict them."""
    reason, rule = reason_and_rule(_PREAMBLE + f"2024-05-02 10:15:17 ERROR eval failed: name '{name}' is not defined\n")
    assert rule is None or not rule.startswith("emitter-native-"), (reason, rule)


_PROGRESS_THEN_OOM = """\
2024-05-02 10:15:31 INFO  epoch 0 step 300/5000 loss 1.8812 lr 1.0e-04
2024-05-02 10:16:02 INFO  epoch 0 step 400/5000 loss 1.7420 lr 1.0e-04
2024-05-02 10:16:33 INFO  epoch 0 step 500/5000 loss 1.6905 lr 1.0e-04
torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB
"""


@pytest.mark.parametrize(
    "line",
    [
        "2024-05-02 10:15:17 WARNING skipping sample 1234: invalid literal for int() with base 10: 'n/a'",
        "2024-05-02 10:15:17 WARNING metric precision undefined this step: float division by zero",
        "2024-05-02 10:15:17 WARNING wandb hook failed: 'NoneType' object has no attribute 'log'",
        "2024-05-02 10:15:17 ERROR callback on_step_end failed: name 'tb_writer' is not defined",
    ],
)
def test_a_message_the_run_survived_is_not_the_cause_of_a_later_failure(line: str) -> None:
    """The run went on from it (training progress after it), and what ended it is another failure."""
    assert reason_of(_PREAMBLE + line + "\n" + _PROGRESS_THEN_OOM) == "gpu_oom"


@pytest.mark.parametrize(
    "line",
    [
        # advice and documentation that names the words
        "Tip: a 'division by zero' in the metrics means an empty validation split.",
        "The recall is undefined when a division by zero happens in an empty class.",
        "note: the name 'cfg' is not defined in this scope until setup() runs",
        "See docs: the module raises if a variable is referenced before its assignment in the config.",
        "hint: sys.setrecursionlimit() raises the limit used for the maximum recursion depth",
        # the exit statuses and signals the section leaves out
        "*** SIGTERM received at time=1700000000 on cpu 1 ***",
        "Process finished with exit code 134 (interrupted by signal 6: SIGABRT)",
        "subprocess.CalledProcessError: Command 'python train.py' returned non-zero exit status -15.",
        # glog's INFO and WARNING lines and an unrelated 'thread' line
        "W1125 12:00:00.000000  1234 gpu_util.cc:12] Check the driver version",
        "thread 'main' finished in 12.3s",
        # a module attribute: the version of a library, not settled by the taxonomy
        "module 'numpy' has no attribute 'float'",
        # faulthandler's Windows codes the section leaves out
        "Windows fatal exception: code 0xc0000139",
        "Windows fatal exception: page error",
    ],
)
def test_benign_or_left_out_lines_are_not_read_by_the_section(line: str) -> None:
    reason, rule = reason_and_rule(_PREAMBLE + line + "\n")
    assert not (rule or "").startswith("emitter-native-"), (reason, rule)
    assert reason not in ("script_error", "framework_error"), (reason, rule)
