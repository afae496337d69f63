"""The deterministic diagnosis: scan every log of a run, then pick the root cause across ranks and nodes.

Scanning a line: the prefilter (one regex over all rule keywords) rejects most lines at once; a line
that passes is normalised and matched against the rules; NVRM Xid lines go through the Xid table;
Python tracebacks are followed to their final exception, which is classified by its type and by where
the last frame is (user code → script error, framework code → framework error). Frames whose header was
cut off are followed the same way; an exception line met alone (a report's last line) is classified by its
message, else by its type (RuntimeError and AssertionError → framework error, as the taxonomy's
evidence): weakly, as a warning that any other signature or a later exit outweighs, and not at all when
training went on after it.

Weighing, within one file: each candidate has a severity (a warning, an error, a traceback's fatal
exception, or the exit itself as a launcher, the scheduler or the collector tells it). What the run went
on from is not what ended it: a root candidate followed by training progress and then an error of another
kind, or a warning followed by a specific error or an exit of another kind in the same process, was
survived, and becomes a cascade.

Choosing: "ignore" matches (advice text) cover the rest of their line and never become candidates;
root-cause candidates beat cascades (an NCCL timeout is the answer only when nothing caused it); among
candidates the higher priority wins, then the earliest evidence (by timestamp where the lines carry one,
else by position in the file). torchrun's ChildFailedError summary names the first failing rank and
host; candidates of that rank are preferred.
"""

from __future__ import annotations

import builtins
import math
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache

from gpuwatch.diagnosis.logview import ListView, LogView
from gpuwatch.diagnosis.model import Diagnosis, Evidence, LogSource
from gpuwatch.diagnosis.normalize import normalize, syslog_host
from gpuwatch.diagnosis.rules import Frameworks, RuleSet, load_frameworks, load_rules
from gpuwatch.diagnosis.stream import FileLines, StreamView, streamable
from gpuwatch.diagnosis.xid import APPLICATION_XIDS, XID_LINE, xid_code, xid_reason

#: Below this the rules are "not confident" and the LLM analyser, when configured, is asked.
CONFIDENT = 0.7
MAX_EVIDENCE = 6
_MAX_TRACEBACK = 400  # lines a traceback is followed for, looking for its final exception

# A traceback frame as Python writes it ('File "x.py", line 3'), as IPython does ("/x.py in f(...)"), as
# IPython 8 does ("File /x.py:207, in f(...)", "File _catboost.pyx:4478, in ...", a Windows path too: the
# keras frame of case 883) and as rich draws it ("│ /x.py:3 in f │").
_FRAME = re.compile(
    r'^\s*(?:File "|(?=/))(?P<path>[^"]+)", (?:line \d+|in [\w<>.]+$)'  # a frame quoted without its line too
    r"|^(?P<ipython>/\S+\.py) in [\w<>]+\("
    r"|^File (?P<ipy8>[^\s,<][^,]*?\.py[xi]?):\d+, in [\w<>.]+"
    r"|^│\s*(?P<rich>~?/?[\w.~/-]+\.py):\d+"
    # Round 23A: a frame pasted with its head cut off, the path's start and 'File "' lost with it
    # ('python3.10/site-packages/tensorflow/python/ops/check_ops.py", line 1153, in assert_rank', TF-Agents,
    # case 1712): the closing quote, the line and the function still say it is one.
    r'|^\s*(?P<cut>[\w.~-]+(?:[\\/][\w.~-]+)+\.pyx?)", line \d+, in [\w<>.]+\s*$'
)
# Round 66's session: rich's box around a traceback whose header the excerpt cut (LLM-Shearing under FSDP, case 3126):
# its lines are the traceback's, and a frame's path too long for the box is wrapped onto the next line anywhere, even
# inside a name ("│ /root/.../site-packages/torch/nn/modules/m │" over "│ odule.py:1818 in state_dict │"): the
# path's first part, alone in its box line, is joined to the frame under it.
_RICH_BOX = re.compile(r"^[│╭╰]")
_RICH_WRAPPED = re.compile(r"^│\s*(~?/[\w.~/-]+)\s*│$")
# IPython 8's numbered source lines around a frame's line ("---> 84 state_values[0][\"step\"]", "86 if not
# step_is_tensor:", their indentation lost in a paste: Ultralytics resuming in a notebook, case 3385): the traceback's.
_IPYTHON_CONTEXT = re.compile(r"^(?:-*>\s*)?\d+(?:\s|$)|^\(\.\.\.\)$")  # "(...)": lines it left out
# Round 68's session: a loss that diverges in numbers, not words (QLoRA's "{'loss': 2.183}" ... "{'loss': 50.7927}" and
# the log ends, case 3125; HyperPose's total_loss going from 52 to 1.1e12, case 2463): the loss values of the log's
# last lines (a key naming a loss, not its scale, then a number), read once the scan is over. The tail is read apart
# because progress lines pass no keyword of the prefilter.
_LOSS_VALUE = re.compile(
    r"(?i)(?<![\w.])['\"]?(?:\w+_)?loss(?!\s*_?scale)(?:_\w+)?['\"]?\s*[:=]?\s*"
    r"['\"]?(?P<v>[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|[-+]?inf)(?![\w.])"
)
_LOSS_TAIL = 200  # lines
_LOSS_RISE = 10.0  # the last value over the median of those before it
# Python's header, and Sacred's for the traceback it shortens ("most recent calls WITHOUT Sacred internals").
_TRACEBACK = re.compile(r"Traceback \(most recent calls? (?:last|WITHOUT Sacred internals)\)")
# An exception's line; Google's API errors are named without "Error" and say an HTTP status first
# ("google.api_core.exceptions.InvalidArgument: 400 ...", "NotFound: 404 ..."); a plain ``Exception``
# (what old torch's mp.spawn and fairseq's distributed utilities raise, case 792) is one too.
# Round 33A: JAX hands an exception raised under a transformation on as "jax._src.traceback_util.
# UnfilteredStackTrace: AttributeError: ..." when tracebacks are not filtered (case 2062): the exception is the
# one after the wrapper's name.
_EXCEPTION = re.compile(
    r"^(?:(?:[A-Za-z_]\w*\.)*UnfilteredStackTrace: )?"
    r"(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)|Exception|(?:[A-Za-z_]\w*\.)*(?:BadRequest|InvalidArgument"
    r"|FailedPrecondition|OutOfRange|Unauthorized|Unauthenticated|Forbidden|PermissionDenied|NotFound|MethodNotAllowed"
    r"|Conflict|AlreadyExists|Aborted|PreconditionFailed|TooManyRequests|ResourceExhausted|Cancelled|Unknown|DataLoss"
    r"|MethodNotImplemented|BadGateway|ServiceUnavailable|GatewayTimeout|DeadlineExceeded)(?=: [1-5]\d\d\b))"
    r"(?::\s?(?P<msg>.*))?$"
)

# Round 13B: Julia's account of an uncaught exception (NeuralOperators.jl training on CUDA arrays, case 1227):
# "ERROR: [LoadError: ]MethodError: ..." and, after the message (a MethodError lists its candidate methods),
# "Stacktrace:" with the innermost frame first, each "[1] f(...)" over "@ Module path:line" (Julia 1.6 and
# later) or "[1] f(...) at path:line" (before, when the error was also written as its repr:
# 'DimensionMismatch("A has dimensions ...")'). Only a "Stacktrace:" makes the line Julia's: a Python
# logger's "ERROR: RuntimeError: ..." stays a logged line. (normalize() takes "ERROR: " off as a level.)
_JULIA_ERROR = re.compile(
    r"^(?:ERROR: )?(?:LoadError: )*(?P<type>(?:[A-Z]\w*\.)*[A-Z]\w*(?:Error|Exception|Mismatch))"
    r"(?:: ?(?P<msg>.*)|\((?P<args>.*)\))?$"
)
_JULIA_STACKTRACE = re.compile(r"^\s*Stacktrace:\s*$")
_JULIA_FRAME = re.compile(
    r"^\s*(?:\[\d+\] .*? at (?P<old>\S+?):\d+|@ (?:(?P<module>[\w.]+) )?(?P<path>\S+?):\d+(?: \[inlined\])?)\s*$"
)
_JULIA_FRAME_HEAD = re.compile(r"^\s*\[\d+\] |^\s*⋮|^\s*\.\.\.|^\s*$")
# The language's own frames (Base, Core, the standard libraries shipped with Julia), passed over as torch's
# own frames are for a torch op: the first frame past them says whose code called.
_JULIA_OWN = re.compile(r"^(?:Base|Core)(?:\.|$)|^\./|[\\/]share[\\/]julia[\\/]|[\\/]julia[\\/](?:base|stdlib)[\\/]")
# Julia's installed packages, the counterpart of site-packages.
_JULIA_PACKAGE = re.compile(r"[\\/]\.julia[\\/](?:packages|artifacts)[\\/]")


# Round 59A: a Cython module's frame names its .pyx without the package's directories ('File "mtrand.pyx", line 894, in
# numpy.random.mtrand.RandomState.choice', DPR's reader, case 2931); the function's qualified name carries them.
_BARE_PYX = re.compile(r"^\w+\.pyx$")
_QUALNAME = re.compile(r", in ([\w.]+)\s*$")


def _frame_path(frame: re.Match[str]) -> str:
    """The path a frame names, whichever way it was written (a bare .pyx placed in its package's directories)."""
    path = next(frame.group(g) for g in ("path", "ipython", "ipy8", "rich", "cut") if frame.group(g))
    if _BARE_PYX.match(path) and (qual := _QUALNAME.search(frame.string)) is not None:
        parts, stem = qual.group(1).split("."), path[: -len(".pyx")]
        if stem in parts[:-1]:
            return "/".join(parts[: parts.index(stem)]) + "/" + path
    return path


# A framework's package also when it runs from its source tree (a container's /t5x/t5x/train.py, a clone's
# fairseq/, nemo/): training frameworks that are commonly run that way.
# An exception written as its repr, alone on a line: Hydra's "Error in call to target 'X':" puts the
# exception it caught on the next line that way (TypeError("... got an unexpected keyword argument 'x'"),
# case 858), and so do loggers handed ``repr(e)``. Read as "Type: message".
_EXCEPTION_REPR = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception))\((?P<q>[\"'])(?P<msg>.*)(?P=q),?\)$")
# Hydra's _locate, which resolves a config's _target_ by importing it piece by piece: an AttributeError or
# ImportError raised there is a target module that did not import (the chained exception of its "Error
# locating target", case 878, whose last line the excerpt may not hold).
_LOCATE_FRAME = re.compile(r"hydra[\\/]_internal[\\/]utils\.py\", line \d+, in _locate\b")
_LOCATE_EXCEPTIONS = frozenset({"AttributeError", "ImportError", "ModuleNotFoundError"})
# A script's own check on the number of GPUs torch sees ("assert num_gpu <= torch.cuda.device_count()",
# ByteTrack, case 867): a bare AssertionError there says the launch asked for more GPUs than the node
# shows, as "invalid device ordinal" does.
_GPU_COUNT_ASSERT = re.compile(r"^assert\b.*\b(?:device_count|gpu_count|num_gpus)\(\)")
# A program's assertion on the options it was launched with (the Stable Diffusion web UI's "assert not
# shared.cmd_opts.lowvram, 'Training models with lowvram not possible'", case 925): the launch asked for what
# the program refuses, as a trainer refusing the GPUs it was given does (case 613).
# Round 35A: the same check on the parsed command line under its usual names, args and opt ("assert
# LongLoRAModelType.LLAMA in args.model_type", ms-swift refusing LongLoRA for a LLaVA model, case 2142), tested
# before its message or a comma: the launch asked for what the program does not do.
_LAUNCH_OPTION_ASSERT = re.compile(
    r"^assert\b[^,]*\b(?:cmd_opts|cmdline_opts|cli_opts|cli_args|command_line_args|args|opts?)\.\w+"
)
# Round 15A: an assertion that values are finite ("assert not torch.isnan(flow_preds[i]).any() and not
# torch.isinf(flow_preds[i]).any()" in RAFT-Stereo's sequence_loss, case 1378): a bare AssertionError there
# says the predictions or the loss went NaN or Inf, as "loss is nan" does.
_NON_FINITE_ASSERT = re.compile(r"^assert\b.*\b(?:isnan|isinf|isfinite|isneginf|isposinf)\(")
# Round 36's session: an assertion that a path exists ("assert os.path.isfile(args.fgraph_pickle)", DEVO's
# train.py before a file it never generated, case 1904; pathlib's .exists()): a missing path, as
# FileNotFoundError says it. "assert not os.path.exists(...)" (refusing to overwrite) is not one.
_PATH_EXISTS_ASSERT = re.compile(
    r"^assert(?!\s*\(?\s*not\b)\s*\(?\s*[^,]*?\b(?:os\.path\.(?:isfile|isdir|exists)\(|[\w.\]\[)]+\.(?:is_file|is_dir|exists)\(\))"
)


def _assertion(code: str | None) -> tuple[str, str, int] | None:
    """What a bare AssertionError's raising statement says it checked: (reason, rule id, priority), or None."""
    if code is None:
        return None
    if _GPU_COUNT_ASSERT.match(code):
        return "argument_error", "assert-gpu-count", 60
    if _PATH_EXISTS_ASSERT.match(code):  # before the options: a path given on the command line is still a path
        return "file_not_found", "assert-path-exists", 56
    if _LAUNCH_OPTION_ASSERT.match(code):
        return "argument_error", "assert-launch-option", 60
    if _NON_FINITE_ASSERT.match(code):
        return "loss_divergence", "assert-non-finite", 57
    return None


# A traceback written on one line (_inline_traceback): its frames, and the exception after the last of them; where a
# chained traceback's words join its parts on that line.
_INLINE_FRAME = re.compile(r'\bFile "(?P<path>[^"]+)", line \d+, in [\w<>.]+')
_CHAINED = re.compile(r"\s*(?:During handling of the above exception|The above exception was the direct cause)")
_INLINE_EXCEPTION = re.compile(r"(?:^|(?<=\s))(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)): ")
# Round 38B: VS Code's debugger (debugpy) reporting an exception it stopped on: "Exception has occurred:
# RuntimeError       (note: full exception trace is shown but execution is paused at: ...)", the message on the
# next line, then the frames innermost first (case 2300).
_DEBUGPY_HEAD = re.compile(r"^Exception has occurred: (?P<type>[A-Za-z_][\w.]*)\b")
# Round 66's session: an exception hook's report of the exception that ended the process, anywhere in a structured
# log line (OLMo's "olmo.util:163\tCRITICAL\tUncaught AssertionError: TorchLegacyShardedCheckpointer is being called
# ...", case 3113): the process's fatal exception, with no frame shown.
_UNCAUGHT = re.compile(r"\bUncaught (?=[A-Za-z_][\w.]*(?:Error|Exception)\b)")
# Round 65's session: a launcher refusing what it was given to launch with, in its own code before any worker ran
# (horovodrun's "ValueError: Invalid host input, please make sure it has format as : worker-0:2,worker-1:2." in
# horovod/run/run.py, a hostfile in the wrong form, case 3083): the launch's arguments. Round 177: torch's elastic
# rendezvous parsing what the launcher was given ("ValueError: The port number of the rendezvous endpoint 'None:None'
# must be an integer between 0 and 65536." in rendezvous/utils.py, accelerate's --same_network given a value, case
# 6251).
_LAUNCHER_FRAME = re.compile(
    r"[\\/]horovod[\\/]run(?:ner)?[\\/]|[\\/]torch[\\/]distributed[\\/](?:run|launch)\.py$"
    r"|[\\/]deepspeed[\\/]launcher[\\/]|[\\/]accelerate[\\/]commands[\\/]"
    r"|[\\/]torch[\\/]distributed[\\/]elastic[\\/]rendezvous[\\/]"
)
# Round 34A: a list of the devices the process sees, indexed by the device the launch asked for ("place =
# dev_list[device_id]" in RocketQA's cross encoder, given device_id=5 on a machine with fewer GPUs, case 2103):
# an IndexError there is the launch's request past the visible GPUs, as "invalid device ordinal" is.
_DEVICE_LIST_INDEX = re.compile(
    r"\b\w*(?:dev|device|gpu|place)s?(?:_list|_ids|list|ids)?\[\s*(?:[\w.]+\.)?(?:device_id|gpu_id|device_index|gpu_index|local_rank)\s*\]"
)
# Round 150's batch: DeepSpeed's op builder compiling or loading an op at run time (its CPU Adam on each node,
# case 5504).
_OP_BUILD_FRAME = re.compile(
    r"[\\/]deepspeed[\\/]ops[\\/]op_builder[\\/]\w+\.py\S*,? line \d+, in (?:jit_load|load|build)\b"
)


def _cut_inside(loading: bool, building: bool) -> tuple[str, str] | None:
    """(reason, what) for a traceback cut after a frame of checkpoint loading or of DeepSpeed's op builder."""
    if loading:
        return "checkpoint_load_error", "checkpoint-loading"
    if building:
        return "import_error", "op-build"
    return None


# A frame of a framework's checkpoint loading (Lightning's load_from_checkpoint and checkpoint connector,
# torch's load_state_dict, mmcv's load_checkpoint, Keras' load_weights, Chainer's serializers: load_npz
# resuming a trainer whose snapshot does not fit the run, case 897): an exception that says only its type
# (a KeyError for an entry the file lacks) or a shape it could not fit raised there is the checkpoint's,
# not the script's. Round 32B: a loader's name with a suffix (OpenVINO Training Extensions'
# load_state_dict_incrementally refusing a checkpoint without its label_info, case 2048). Round 75's session: a runner's
# resume (MMEngine's Runner.resume and load_or_resume reading a checkpoint without the "message_hub" entry it expects,
# mmyolo, case 3399).
_CHECKPOINT_FRAME = re.compile(
    r"\bin _?(?:load_from_checkpoint|load_model_state|load_state_dict(?:_\w+)?|load_checkpoint|restore_training_state"
    r"|load_from_file|restore_model|restore_optimizers_and_schedulers|resume_from_checkpoint"
    r"|load_from_state_dict|load_npz|load_hdf5|load_weights|resume|load_or_resume"
    # Rounds 173-176: a loader named for the weights it copies (Detectron.pytorch's load_detectron_weight, case 6162;
    # Detectron's initialize_gpu_from_weights_file asserting a blob's shape, case 6163)
    r"|load_\w+_weights?|initialize_\w*from_weights_file)\b|checkpoint_connector\.py"
    r"|/chainer/serializers/"
    # Round 62A: torch.distributed.checkpoint's loader (its "assert metadata is not None" under SimpleTuner's FSDP
    # resume, case 3019)
    r"|[\\/]torch[\\/]distributed[\\/]checkpoint[\\/]state_dict_loader\.py"
    # Round 185: torch.load itself, reading a file that is not what it expects ("RuntimeError: Invalid magic number;
    # corrupt file?" in _legacy_load, task_vectors' released weights, case 6401; "storage has wrong size", cases 6402,
    # 6404)
    r'|[\\/]torch[\\/]serialization\.py", line \d+, in _?(?:legacy_)?load\b'
    # Round 75's session: an optimizer restoring the state it was loaded with (AdamW.__setstate__ finding no "step" in a
    # resumed Ultralytics checkpoint's optimizer state, case 3385)
    r"|[\\/]torch[\\/]optim[\\/]\w+\.py\S*,? (?:line \d+, )?in (?:\w+\.)?__setstate__\b"
    # Round 76's session: Orbax restoring a checkpoint's parts (its sharding read back from the checkpoint, which a run
    # on fewer devices cannot reshape, case 3428)
    r"|[\\/]orbax[\\/]checkpoint[\\/]\S+,? (?:line \d+, )?in _?(?:\w+\.)?(?:restore|deserialize|async_deserialize)\w*\b"
)
# The last frame's code line calling a checkpoint loader ("teacher, _, _ = apputils.load_checkpoint(teacher,
# chkpt_file=args.kd_resume)", Distiller's knowledge distillation, the excerpt cut there, case 4670): a traceback cut
# there was loading a checkpoint, as one cut inside the loader's own frame was.
_CHECKPOINT_CALL = re.compile(r"\b(?:load_checkpoint|load_state_dict|load_from_checkpoint|load_weights|torch\.load)\(")
# A framework's attribute-lookup hook (torch's Module.__getattr__): an AttributeError it raises answers the
# caller's lookup (`model.module` on a model DDP never wrapped), so the frame before it decides.
_LOOKUP_FRAME = re.compile(r", in __getattr(?:ibute)?__\s*$")
# Round 11B: NVML asked for a device handle by an index the node has no GPU for (NVIDIA's ELECTRA binding
# each Horovod local rank to "its" GPU, case 1057): pynvml's NVMLError_InvalidArgument raised under
# nvmlDeviceGetHandleByIndex is the launch asking for more GPUs than the node shows, as "invalid device
# ordinal" is.
_BY_INDEX_FRAME = re.compile(r", in nvmlDeviceGetHandleByIndex\w*\s*$")
_NVML_INVALID_ARGUMENT = re.compile(r"^(?:\w+\.)*NVMLError_InvalidArgument\b")
# Round 41A/42B: a module's body run as it is imported (its frame "in <module>", called by another frame, the
# import statement) asking another module for a name that module does not have: "module 'distutils' has no
# attribute 'version'" in torch's tensorboard/__init__.py under a newer setuptools (Pocket2Mol, case 2402),
# "module 'torchvision.transforms.v2' has no attribute 'ConvertDtype'" in RT-DETR's transforms.py under another
# torchvision (case 2431). The environment holds versions that do not fit together: the run cannot import what
# it needs, as an ImportError says. The entry script's own body (its frame the first, or runpy's) asking a
# module is still the script's call (OpenNRE's example, case 1930).
_IMPORTING_FRAME = re.compile(r", in <module>\s*$")
_RUNPY_FRAME = re.compile(r"[\\/]runpy\.py\b")
_MODULE_LACKS = re.compile(r"^module '[\w.]+' has no attribute '\w+'")
# Round 105: a NameError raised while a framework's module is being imported (NeMo's retro_dataset.py naming the
# RetroConfig that its guarded import of megatron.core left undefined, NeMo-Aligner's DPO, case 4381): the installed
# versions do not fit together, as a missing name at import is.
# Round 106: transformers' table of model types asked for one it does not know (a KeyError raised in
# configuration_auto.py's __getitem__, "KeyError: 'llama'" from a transformers older than LLaMA, Stanford Alpaca,
# case 4412): the installed transformers is too old for the model; the newer releases say so in words. Its known miss:
# LiLT's own model type, which its package registers, asked for without that package imported (case 2577).
_MODEL_TYPE_TABLE = re.compile(
    r"[\\/]transformers[\\/]models[\\/]auto[\\/]configuration_auto\.py\", line \d+, in __getitem__"
)
# Round 41A: CUDA used in a DataLoader worker that was forked from a process that had initialised it: the
# worker's "CUDA error: initialization error" (PyG's NeighborLoader over a graph on the GPU with num_workers > 0,
# case 2398) or torch's "Cannot re-initialize CUDA in forked subprocess". The data pipeline's set-up, not the
# GPU: on the CPU, or with workers started by spawn, it runs.
# Round 45A: a DataLoader worker failing to receive its task, in multiprocessing's own frames of its index queue
# (queues.py's get unpickling the index a sampler sent: TorchGeo's BoundingBox rebuilt without its fields,
# "TypeError: __new__() missing 5 required positional arguments", case 2510): the data pipeline's objects do not
# survive the trip to the worker, whatever the exception says.
_WORKER_RECEIVE_FRAME = re.compile(r"[\\/]multiprocessing[\\/](?:queues|reduction|connection)\.py$")
_WORKER_CUDA_INIT = re.compile(r"CUDA error: initialization error|Cannot re-initialize CUDA in forked subprocess")
# Round 42A: h5py's KeyError for an object an HDF5 file does not hold ("Unable to open object (object 'hdf5_path'
# doesn't exist)", HTS-AT reading AudioSet's packed waveforms, case 2430; "Unable to synchronously open object" in
# h5py 3): the file the run reads is not what it expects: a dataset's read error, or, raised in a checkpoint's
# loading (Keras' load_weights), the checkpoint's.
_H5_MISSING = re.compile(r"Unable to (?:synchronously )?open object \(object '[^']*' doesn't exist\)")
# Round 45B: the last line of an excerpt, under its last frame's source line, a sentence with no exception type
# ("The size of tensor a (76800) must match the size of tensor b (32768) at non-singleton dimension 1", UNETR++ on
# the reporter's own data, case 2519; "Function MulBackward0 returned an invalid gradient at index 0" under
# RoboSat.pink's trainer, case 2514): the report pasted the error from the issue's title, its type lost. Judged
# as the traceback's final exception would be, by its message and the frame that raised it.
_UNTYPED_MESSAGE = re.compile(r"^[A-Z][a-z]+(?: [\w(),.:'`\[\]=<>-]+){3,}$")
# Round 192: the same sentence under a raise statement whose message is on the lines below it ("raise ValueError(",
# then "Please make sure to properly initialize your accelerator via `accelerator = Accelerator()` ...", accelerate's
# state.py, case 6540): the statement names the type the paste lost.
_OPEN_RAISE = re.compile(r"^raise (?P<type>[A-Z]\w*(?:Error|Exception))\($")
# Round 62A: a raise statement with a literal message, the last line of a cut excerpt ("raise ValueError(f\"Can't find
# a valid checkpoint at {checkpoint_path}\")").
_RAISE_STATEMENT = re.compile(r"^raise (?P<type>[A-Z]\w*(?:Error|Exception))\(f?(?P<q>[\"'])(?P<msg>.+?)(?P=q)\)\s*$")
# Round 51A: a file the run's data code reads that is not text in its encoding ("UnicodeDecodeError: 'utf-8' codec
# can't decode bytes ..." raised in codecs' decode under minimind's dataset.py load_data, a corrupt jsonl, case
# 2697): the dataset's read error. Raised under any other code (a config read on Windows in another locale) it
# stays the script's.
_CODECS_FRAME = re.compile(r"(?:<frozen codecs>|[\\/]codecs\.py)$")
_DATA_CODE = re.compile(r"(?i)(?:^|[\\/])[\w-]*data(?:set|loader|_utils|_loader)?s?(?:\.py$|[\\/])")
# Round 60A, and older misses (2008, 2765): Python's and numpy's words for an empty collection ("not enough values to
# unpack (expected 2, got 0)" from zip(*cache.values()) in yolov5-face's dataset with every label rejected; "empty
# range for randrange() (0,0, 0)" picking a mask from an empty mask list in EdgeConnect's dataset), raised in a data
# module's code or called by it: the dataset came out empty, the data's. The same words in the run's other code
# stay the script's (DPR's reader choosing among no positives, case 2931).
_EMPTY_DATA = re.compile(
    r"not enough values to unpack \(expected \d+, got 0\)|empty range for randrange\(\)"
    r"|Cannot choose from an empty sequence|attempt to get arg(?:min|max) of an empty sequence"
)
# Round 42B: a KeyError quoted under the line that raised it, with no frame to say whose code that is, where the
# line reads an entry of a loaded checkpoint ("self._epoch = checkpoint['meta']['epoch']", resuming Co-DETR from
# released weights that hold only a state_dict, case 2438): the file lacks the entry, as a KeyError raised in a
# framework's checkpoint loading says (cases 415, 417). In a frame of the script's own, it stays the script's.
_CHECKPOINT_ENTRY = re.compile(r"\b(?:checkpoint|ckpt|state_dict)\w*\s*\[\s*['\"]")
# Round 29B: a type error inside a loader is the file not being what the loader expects (flair's load_from_file
# subscripting what an older flair pickled as a whole SequenceTagger, case 1924), as its KeyError is.
_CHECKPOINT_EXCEPTIONS = frozenset(
    {"KeyError", "RuntimeError", "ValueError", "EOFError", "AssertionError", "TypeError"}
)
# A frame that only re-raises what a replica raised (DataParallel's parallel_apply, torch's reraise): it
# says nothing of where the exception came from, so the exception is judged as one with no frame.
_RERAISE_FRAME = re.compile(r"[\\/]parallel_apply\.py\b|[\\/]torch[\\/]_utils\.py\", line \d+, in reraise")
# Round 178: six's raise_from, which Python 2-compatible code (TensorFlow 2.0's eager execute, case 6271) runs from a
# string: a frame of no file that only raises what its caller built, so the caller's frame stays the last.
_RAISE_FROM_FRAME = re.compile(r'^\s*File "<string>", line \d+, in raise_from\s*$')
# The DataLoader's main-process iterator handing on what a worker raised (_process_data re-raises the
# worker's ExceptionWrapper): the exception is the worker's, though torch's "Caught X in DataLoader worker
# process N" line may be missing (an exception whose str() failed: "soundfile.LibsndfileError: <exception
# str() failed>", Bert-VITS2, case 946). Missing paths, permissions and connections stay their own reasons,
# as the dataloader rule leaves them. Round 159: torch 0.4's _process_next_batch, which re-raised the worker's type
# with its traceback as the message ("raise batch.exc_type(batch.exc_msg)", DSB2017, case 5721).
_WORKER_RERAISE = re.compile(
    r"[\\/]torch[\\/]utils[\\/]data[\\/]dataloader\.py\", line \d+, in _process_(?:data|next_batch)\b"
)
# Round 11B: a data loader's worker function in another framework's words (GluonNLP's and MXNet's
# "_batch_worker_fn", "_worker_fn", "worker_loop" under a data/ package, run by a multiprocessing pool whose
# RemoteTraceback carries what the worker raised, case 1056): what it raises is the data pipeline's, as a
# worker exception torch's DataLoader re-raises is.
_DATA_WORKER_FRAME = re.compile(r"[\\/]data[\\/][\w\\/]*\.py\", line \d+, in _?(?:batch_)?worker_(?:fn|loop)\b")
# Round 80's session: an input-pipeline library's own code raising an exception no rule names (an IndexError in
# datasets' WebDataset builder with no tar found on one of many machines, case 3548): the data the pipeline was given,
# as a DataLoader worker's re-raise is; an exception of a type with its own reason (a missing path) keeps it.
_DATA_LIBRARY_FRAME = re.compile(
    r"[\\/](?:site|dist)-packages[\\/](?:datasets[\\/](?:packaged_modules[\\/]|builder\.py$|arrow_\w+\.py$"
    r"|iterable_dataset\.py$)|webdataset[\\/]|petastorm[\\/]|streaming[\\/]base[\\/]|nvidia[\\/]dali[\\/]"
    r"|torchdata[\\/]|litdata[\\/]|ray[\\/]data[\\/])"
)
_WORKER_OWN_REASONS = frozenset(
    {"FileNotFoundError", "PermissionError", "ConnectionError", "ConnectionResetError", "ConnectionRefusedError"}
)
# torch's module call, which only dispatches to the module's forward: a traceback whose last frame is this
# call ("return forward_call(*args, **kwargs)") was cut before the frame that raised (a report's excerpt,
# case 786), so it says nothing of where the exception came from.
_DISPATCH_FRAME = re.compile(r"/torch/nn/modules/module\.py\b")
_DISPATCH_CODE = re.compile(r"^return forward_call\(")
# Round 46B: torch's no_grad decorator, which only calls the function it wraps ("decorate_context" in
# torch/autograd/grad_mode.py or torch/utils/_contextlib.py): a traceback whose last frame is it, its source line
# the call or not shown, was cut before the frame that raised (T2M-GPT's evaluation under @torch.no_grad(), its
# scipy "ValueError: Imaginary component", case 2553).
_DECORATOR_FRAME = re.compile(r"[\\/]torch[\\/](?:autograd[\\/]grad_mode|utils[\\/]_contextlib)\.py$")
_DECORATOR_CODE = re.compile(r"^return func\(")
# Round 46A: a mapping's lookup in a framework's own container ("__getitem__" of transformers' BatchFeature,
# "return self.data[item]") raising KeyError answers the caller's key, as an attribute lookup hook's
# AttributeError does: the caller's frame decides (Qwen2-VL-Finetune's data.py asking the processor's output for
# 'pixel_values' it does not hold, case 2545).
_ITEM_FRAME = re.compile(r", in __getitem__\s*$")
# Round 55B: torch's stand-in forward of a Module that defines none ("in _forward_unimplemented", raising a bare
# NotImplementedError): the run built a module without a forward (an nn.Sequential of a model's children that
# holds a container, EfficientNet-PyTorch fine-tuned by the reporter's loop, case 2824): the script's, though torch
# raised it.
_UNIMPLEMENTED_FORWARD = re.compile(r", in _forward_unimplemented\s*$")
# Round 187: a NaN that reaches int() in the run's code for its losses ("ValueError: cannot convert float NaN to
# integer" in DeepFaceLab's get_loss_history_preview, drawing a loss history that went NaN, cases 6442-6444): the loss
# diverged; the plot only found out.
_LOSS_FUNCTION_FRAME = re.compile(r", in \w*loss\w*\s*$", re.IGNORECASE)
_NAN_TO_INT = re.compile(r"\bcannot convert float NaN to integer\b")
# A line of a traceback between its frames: the source line under a frame, the carets under it,
# "[Previous line repeated N more times]", and PyCharm's debugger's "python-BaseException" printed between a
# frame and its source line (case 1128).
# Round 74's session: torch.compile's BackendCompilerFailed names the backend on a line of its own, over the exception
# it caught ("backend='compile_fn' raised:", Lightning's DDP under torch.compile, case 3363): still the traceback's.
_TRACEBACK_BODY = re.compile(
    # Python 3.13 shows a frame's whole statement, its middle lines elided and its closing bracket on a line of its own
    # ("raise ValueError(", "...<2 lines>...", ")", torchtitan's get_mesh, case 6902)
    r"^[\s~^]*$|^\[Previous line repeated \d+ more times?\]$|^python-BaseException$|^\s*\.\.\.<\d+ lines?>\.\.\.$"
    r"|^\s*[)\]}]+[,;]?$"
    r"|^(?:[\w.]*BackendCompilerFailed: )?backend='[^']+' raised:$"
)
# The source line of the last frame is a for statement: the exception came from the iterator's
# __next__, in a training loop the data loader's (Open-Sora's "for step, batch in pbar:", case 640).
_LOOP_LINE = re.compile(r"^(?:async )?for .+ in .+:$")
# The DataLoader's own machinery in a frame: its iterator, and the file descriptors its workers pass
# tensors through (multiprocessing's resource_sharer, torch's rebuild_storage_fd).
_LOADER_FRAME = re.compile(
    r"[\\/]torch[\\/]utils[\\/]data[\\/]|[\\/]multiprocessing[\\/]resource_sharer\.py"
    r"|[\\/]torch[\\/]multiprocessing[\\/]reductions\.py"
)
# What an iterator that failed raises at the loop: its peer (a worker) gone, or a generator run dry.
_LOADER_EXCEPTIONS = frozenset(
    {"ConnectionResetError", "ConnectionRefusedError", "ConnectionAbortedError", "BrokenPipeError", "EOFError"}
)
_RAN_DRY = re.compile(r"generator raised StopIteration")
# Python's own words for a bug in the code that ran: a name never bound, None used as a value. Raised in an
# installed package that is not one of the frameworks below (a model-zoo package, an application's CLI:
# labml_nn's trainer, stylegan2_pytorch's cli.py, cases 709 and 724), the bug is the application's, code
# the user runs rather than a framework it runs on: the taxonomy files it with the script's. A framework's
# own exceptions (its ValueError, its RuntimeError) are still judged by where they were raised.
# Round 10A: a division by zero too (diffwave's learner dividing by the length of an empty dataset, case
# 952). Round 45B: a general-purpose library's own None bug is that library's, not an application's (threadpoolctl
# reading a BLAS library's config that is None under nnU-Net on Windows, case 2528).
_CODE_BUG_TYPES = frozenset({"NameError", "UnboundLocalError", "ZeroDivisionError"})
_NONE_MISUSE = re.compile(
    r"cannot unpack non-iterable NoneType object|^'NoneType' object (?:is not (?:subscriptable|iterable|callable)"
    r"|has no attribute |does not support item assignment)|^object of type 'NoneType' has no len\(\)"
    r"|^argument of type 'NoneType' is not iterable"
    # an attribute the object never had (Open3D-ML's pipeline without the cfg_tb its examples set, case 873)
    r"|^'[\w.]+' object has no attribute '\w+'$"
    r"|^unsupported operand type\(s\) for .+: '(?:NoneType' and|.+' and 'NoneType')"
)


def _application_bug(name: str, msg: str, frame: str, frameworks: Frameworks) -> bool:
    """The interpreter's code-bug wording, raised in an installed package that is no framework's."""
    if name not in _CODE_BUG_TYPES and not (name in ("TypeError", "AttributeError") and _NONE_MISUSE.search(msg)):
        return False
    package = frameworks.installed_package(frame)
    return package is not None and not frameworks.package(package) and not frameworks.library(package)


# A general-purpose library (`[frameworks] libraries`: numpy, scipy, cupy) refusing the
# arguments the run's own code called it with: 'ValueError: Cannot take a larger sample than population' from
# numpy's mtrand.pyx, called from the project's runner (round 16, case 1459). The caller's, as the taxonomy
# files an exception that does not end in a framework's own code; a framework's frame calling the library
# (spaCy's parser calling cupy, case 1061) keeps it the framework's.
_ARGUMENT_EXCEPTIONS = frozenset(
    {"ValueError", "TypeError", "IndexError", "KeyError", "ConfigAttributeError", "ConfigKeyError"}
)


# Round 57's session: the caller is the last frame outside the library (omegaconf's own frames between the
# project's dataloader.py and its "ConfigAttributeError: Missing key fine_tuning", WaveGrad 2, case 2881), and a
# report that kept only the library's frame shows no other caller (pandas' "cannot convert the series to <class
# 'float'>" in a FinRL notebook, case 1701): the run's code is the one that called it.
def _outside_package(paths: Sequence[str], frameworks: Frameworks) -> str | None:
    """The last frame of ``paths`` outside the package of the last one (the code that called into it), or None
    when every frame shown is that package's."""
    if not paths:
        return None

    def unit(path: str) -> str:  # the package, or for code in no package (the stdlib's random.py) its directory
        return frameworks.package_of(path) or re.split(r"[\\/][^\\/]*$", path)[0]

    last = unit(paths[-1])
    return next((p for p in reversed(paths[:-1]) if unit(p) != last), None)


def _library_refused_caller(name: str, frame: str, caller: str | None, frameworks: Frameworks) -> bool:
    """An argument error raised in a general-purpose library, called straight from the run's code, or with no
    caller shown (a report that kept only the library's frame)."""
    if name not in _ARGUMENT_EXCEPTIONS or (caller is not None and frameworks.path(caller)):
        return False
    package = frameworks.package_of(frame)
    return package is not None and frameworks.library(package)


# A layer's input of the wrong shape (the layer-input-shape rule: "mat1 and mat2 shapes cannot be multiplied",
# "expected input[...] to have 33 channels") is its caller's: the frame that called the torch op, torch's own
# frames (its modules' forward, F.conv2d's wrappers) passed over. The script's when that caller is the
# script's or the model's; a framework's when a framework's own code called it (round 12A: peft's LoRA layer
# calling F.linear on a weight ZeRO had partitioned, case 1086), as the labelling rules say.
_CALLER_SHAPE_RULES = frozenset({"layer-input-shape"})
# The op libraries whose own frames are passed over to find that caller: torch's, and (round 60A) TensorFlow's and
# Keras's (tf.image's rank check called by MVSNet's train.py, case 1907).
_OP_LIBRARY_FRAME = re.compile(r"[\\/](?:torch|tensorflow|keras|tf_keras)[\\/]")


def _framework_caller(frame: str, frameworks: Frameworks) -> bool:
    """A frame of a framework's own code (not an op library's, which `_OP_LIBRARY_FRAME` passes over)."""
    if not frameworks.path(frame):
        return False
    package = frameworks.installed_package(frame)
    return package is None or frameworks.package(package)


# Round 23A: a Java stack trace under an exception line, as logback writes it with its packaging data: the
# innermost frame "at org.deeplearning4j.rl4j.learning.sync.Transition.dup(Transition.java:50)
# ~[rl4j-core-1.0.0-beta.jar:na]" names the jar it was loaded from, a library's (RL4J's NullPointerException,
# case 1702); the application's own classes are marked "[classes/:na]" and stay the run's.
_JAVA_JAR_FRAME = re.compile(
    r"^\s*at [\w$.<>]+\([\w$]+\.(?:java|scala|kt):\d+\)\s+~?\[(?!classes/)[\w.+-]+\.jar:[^\]]*\]\s*$"
)
# With no frame to tell where it was raised, the type decides as the taxonomy's evidence does:
# RuntimeError and AssertionError are framework errors, the other types script errors.
_FRAMEWORK_TYPES = frozenset({"RuntimeError", "AssertionError"})


# A framework's exception type whose name blames the caller (Lightning's MisconfigurationException, TensorFlow's
# InvalidArgumentError and NotFoundError, datasets' DatasetNotFoundError): raised by the framework, about the run.
_CALLER_FAULT_TYPE = re.compile(
    r"Misconfigur|Invalid|NotFound|Config|Argument|Value|Type|Key|Index|Attribute|Permission"
)


def _framework_type(qualified: str, frameworks: Frameworks) -> bool:
    """Whether an exception's type, named with its module, is a framework's own error (round 196:
    "_catboost.CatBoostError", "torch._dynamo.exc.TorchRuntimeError"): with no frame to say who raised it, the package
    that defines the type did, unless the type's name blames the caller."""
    module, _, name = qualified.rpartition(".")
    package = module.split(".", 1)[0].lstrip("_")
    return bool(package) and frameworks.package(package) and not _CALLER_FAULT_TYPE.search(name)


# A loss the run printed just before a traceback (on the line before its header, or glued before the header
# on the same line) that is no number any more or one no training reaches: NaN, inf, or twelve digits and
# more before the point (ssd.pytorch's "iter 15 || Loss: 11002143798693440.0000 || Traceback (most recent
# call last):", case 1032). Only the traceback's own line and the one before it are read, which both views
# keep (a streamed log splits lines only around the prefilter's matches), so the prefilter is not widened
# to every progress line.
_LOSS_DIVERGED = re.compile(
    r"(?i)\bloss\b\W{0,4}(?:nan|[-+]?inf(?:inity)?|\d{12,}(?:\.\d+)?|\d(?:\.\d+)?e\+?(?:1[2-9]|[2-9]\d|\d{3}))\b"
)
_ISO_TS = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d+))?")
_ROOT_CAUSE_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
# A launcher's line for the first process it saw fail, when no summary names its rank: torchrun's "failed
# (exitcode: -9) local_rank: 0 (pid: 2598)", mp.spawn's "process 0 terminated with signal SIGKILL" (the
# process index is the local rank: the global one on a single node, which is all such a log shows).
_FAILED_LOCAL_RANK = re.compile(
    r"\bfailed \(exitcode: -?\d+\) local_rank: (\d+)|\b[Pp]rocess (\d+) terminated with (?:signal|exit code)"
)
_ROOT_CAUSE_HOST = re.compile(r"^\s*host\s*:\s*(\S+)")
# Files a node writes about itself, named for it: kern-gpu-a12.log, dmesg_gpu-a12.txt, syslog-dgx-3.log.
_NODE_FILE = re.compile(
    r"^(?:kern|kernel|dmesg|syslog|messages|journal|journalctl|netconsole|nvidia-smi|epilog|prolog|"
    r"nvidia-device-plugin|device-plugin|dcgm|fabricmanager)[-_](?P<host>[A-Za-z][\w.-]*?)\.(?:log|txt|out)$"
)
# A line its writer marked as a warning: Python logging's "WARNING:root:" and "| WARNING |", "[WARNING]",
# c10's "[W socket.cpp:464]" / "[W1125 10:02:11.123 ...]", glog's "W1125 10:02:11". NCCL's own
# "NCCL WARN" is how NCCL reports errors, so it is not one.
_WARNING_LEVEL = re.compile(
    r"(?:^|[\s|\[(:-])(?<!NCCL )(?:WARNING|WARN|Warning)(?=[\s:|\]-])"
    r"|(?:^|\]:?)\[W(?:\d{4} [\d:.]+)?\s|^W\d{4} \d{2}:\d{2}"
)
# A node named by the failure message itself: Slurm's "Node failure on X", "*** JOB N ON X CANCELLED ...
# DUE TO NODE FAILURE", "Task launch for N failed on node X: ...", kubectl's "X   NotReady" and its
# events' "Node X status is now: NodeNotReady", Ray's "The node with node id: N and ip: X has been marked
# dead ..." and "... the node it was running on is dead or unavailable. Node IP: X, node ID: N".
_NODE_IN_TEXT = re.compile(
    r"Node failure on (?P<a>[A-Za-z][\w.-]*)"
    r"|\*\*\* (?:JOB|STEP) \S+ ON (?P<b>[A-Za-z][\w.-]*) CANCELLED AT \S+ DUE TO NODE FAIL"
    r"|^(?P<c>[A-Za-z][\w.-]*)\s+NotReady\b"
    r"|Task launch for \S+ failed on node (?P<d>[A-Za-z][\w.-]*):"
    r"|\bNode (?P<e>[A-Za-z0-9][\w.-]*) status is now: NodeNotReady"
    r"|node id: \w+ and (?:ip|address): (?P<f>[\w.:-]+?)(?: and node name: [\w.:-]+)? has been marked dead"
    r"|is dead or unavailable\. Node IP: (?P<g>[\w.:-]+?), node ID:"
)
_SCRIPT_EXCEPTIONS = frozenset(
    {
        "KeyError",
        "TypeError",
        "NameError",
        "AttributeError",
        "IndexError",
        "ValueError",
        "ZeroDivisionError",
        "UnboundLocalError",
        "AssertionError",
        "RuntimeError",
        "NotImplementedError",
        "RecursionError",
        "StopIteration",
        "JSONDecodeError",
        "UnicodeDecodeError",
        "OverflowError",
    }
)
# Exceptions that report someone else's failure; their messages still go through the rules.
# Round 26B: the raising line shown under the last frame raises Exception with no message ("raise Exception" in
# AutoAWQ's _compute_best_scale, case 1805): a bare "Exception" after it is all there is, not a header whose
# message follows on the next lines.
_BARE_RAISE = re.compile(r"raise Exception(?:\(\))?\s*(?:#.*)?$")
_CASCADE_EXCEPTIONS = frozenset(
    {
        "ChildFailedError",
        "SignalException",
        "KeyboardInterrupt",
        "SystemExit",
        "CalledProcessError",
        "DistBackendError",
        # Ray's reports that an actor, a worker or a node died: the death's cause is elsewhere (case 117)
        "RayActorError",
        "ActorDiedError",
        "WorkerCrashedError",
        "NodeDiedError",
        "OwnerDiedError",
    }
)


@dataclass(frozen=True, slots=True)
class Candidate:
    reason: str
    role: str
    confidence: float
    priority: int
    rule_id: str
    evidence: Evidence
    node: str | None
    rank: int | None
    when: datetime | None
    position: float  # 0..1 through its file: the tie-break when lines carry no timestamp
    severity: str = "error"  # one of rules.SEVERITIES
    specific: bool = True  # False for an exception classified only by its type, with no message


def _ruleset(user_dir: str | None) -> RuleSet:
    """The rules, with the user's directory as it is now: a rules file written or changed there (say by
    `gpuwatch rules suggest --write`) is read at the next diagnosis, by a server that is running too."""
    return _compiled(user_dir, _dir_state(user_dir))


def _dir_state(user_dir: str | None) -> tuple[tuple[str, int, int], ...]:
    """What tells one state of a rules directory from another: its *.toml files' names, sizes, mtimes."""
    if not user_dir:
        return ()
    from pathlib import Path

    state = []
    for path in sorted(Path(user_dir).glob("*.toml")):
        try:
            st = path.stat()
        except OSError:  # removed meanwhile
            continue
        state.append((path.name, st.st_size, st.st_mtime_ns))
    return tuple(state)


@lru_cache(maxsize=8)
def _compiled(user_dir: str | None, _state: tuple[tuple[str, int, int], ...]) -> RuleSet:
    from pathlib import Path

    return RuleSet(
        load_rules(Path(user_dir) if user_dir else None),
        frameworks=load_frameworks(Path(user_dir) if user_dir else None),
        extra_keywords=(
            "traceback",
            "xid",
            "root cause",
            '", line ',
            '", in ',  # a frame quoted without its line number (case 1457)
            "file /",  # IPython 8's frame, its header cut ("File /x/adamw.py:84, in AdamW.__setstate__(...)", _FRAME)
            "file ~/",
            "│ /",  # a frame in rich's box, its header cut (_RICH_WRAPPED)
            "│ ~/",
            "error:",
            "exception:",
            "exception has occurred: ",  # VS Code's debugger (_DEBUGPY_HEAD)
            "assertionerror",
            "assert ",  # a statement above a bare AssertionError, read forward from it (_bare_assertion)
            # an exception written as its repr (_EXCEPTION_REPR)
            'error("',
            "error('",
            'exception("',
            "exception('",
            # the first lines of a boot (_BOOT)
            "linux version",
            "boot_image=",
            "booting linux",
            "inserted module",
            "running in system mode",
            "rsyslogd",
            "-- reboot --",
            "-- boot ",
        ),
    )


def _view(source: LogSource, rules: RuleSet) -> LogView:
    """A file streamed as bytes when the source is one and the keywords allow it, else lines in memory."""
    if isinstance(source.lines, FileLines) and streamable(rules):
        return StreamView(source.lines.path, rules)
    return ListView(source.lines, rules)


def _timestamp(line: str) -> datetime | None:
    m = _ISO_TS.search(line[:40])
    if m is None:
        return None
    try:
        return datetime.fromisoformat(f"{m.group(1)} {m.group(2)}.{(m.group(3) or '0')[:6]}")
    except ValueError:
        return None


class _Scanner:
    """One pass over one log file, collecting candidates."""

    def __init__(self, source: LogSource, rules: RuleSet) -> None:
        self.source = source
        self.rules = rules
        named = _NODE_FILE.match(source.file.rsplit("/", 1)[-1])
        self.node = source.node or (named.group("host") if named else None)
        self.view = _view(source, rules)
        self.found: list[Candidate] = []
        self.progress: dict[int, int | None] = {}  # a root candidate's line → the first progress line after it
        self.total = 0
        self.root_rank: int | None = None
        self.failed_rank: int | None = None  # the first rank a launcher's line says failed (_FAILED_LOCAL_RANK)
        self.root_host: str | None = None

    def scan(self) -> None:
        """Visit the lines the prefilter passes; then place each candidate in its file (``position``
        held the line's index until the file's length was known)."""
        view = self.view
        resume = 0
        for i in view.candidates():
            if i >= resume:
                resume = self._visit(i)
        self._loss_at_end()
        self.total = view.count()
        total = max(1, self.total)
        self.found = [replace(c, position=c.position / total) for c in self.found]

    def _loss_at_end(self) -> None:
        """A loss that climbed to ten times its earlier level over the last values the log shows, rising at each
        of the last three, or whose last value is NaN or infinite: the run diverging in numbers rather than words
        (`_LOSS_VALUE`), wherever the line shows it (a bar's postfix with a message glued after it, a bar's
        description), which the rules' own reading of the line may not."""
        start, lines = self.view.tail(_LOSS_TAIL)
        values: list[tuple[int, str, float]] = []
        for k, raw in enumerate(lines):
            if (m := _LOSS_VALUE.search(raw)) is not None:
                values.append((start + k, raw, float(m.group("v"))))
        if values and not math.isfinite(values[-1][2]):
            i, raw, _ = values[-1]
            self._add(i, raw, None, "loss_divergence", "root", 0.7, 12, "loss-not-finite-at-end", last=True)
            return
        values = [v for v in values if math.isfinite(v[2])]
        if len(values) < 4:
            return
        seen = [v for _, _, v in values]
        base = statistics.median(seen[:-1])
        if base > 0 and seen[-1] >= _LOSS_RISE * base and seen[-1] > seen[-2] > seen[-3]:
            i, raw, _ = values[-1]
            self._add(i, raw, None, "loss_divergence", "root", 0.7, 12, "loss-rising", last=True)

    def _visit(self, i: int) -> int:
        """Look at line ``i`` (and what it starts); return the index of the next line to look at."""
        view = self.view
        raw = view.get(i)
        assert raw is not None
        text, prefix_rank = normalize(raw)
        if "Root Cause (first observed failure)" in text:
            j = i + 1
            while j < i + 40 and (line := view.get(j)) is not None:
                inner, _ = normalize(line)
                if not self._root_cause_line(inner):
                    break
                if header := _TRACEBACK.search(inner):
                    # The failed rank's own traceback, which @record wrote to its error_file and the
                    # summary quotes ("  traceback : Traceback (most recent call last):"): read as the
                    # rank's traceback would be, its final exception judged by its type and last frame
                    # (CosyVoice2's "TypeError: 'NoneType' object is not subscriptable", case 1665).
                    j = self._traceback(j, j + 1, prefix=inner[: header.start()])
                    continue
                self._line(j, line, inner, self.root_rank)  # its inline report, if any
                j += 1
            return j + 1
        header = _TRACEBACK.search(text)
        if header is None:
            if _FRAME.match(text) or _RICH_WRAPPED.match(text):  # frames whose header was cut off (a pasted excerpt)
                return self._traceback(i, i, strict=True)
            if (julia := _JULIA_ERROR.match(text)) and (after := self._julia(i, raw, text, prefix_rank, julia)):
                return after
            if text.lstrip().startswith("assert ") and (after_assert := self._bare_assertion(i, text)) is not None:
                return after_assert
            if (paused := _DEBUGPY_HEAD.match(text)) and (after_paused := self._debugger_report(i, raw, paused)):
                return after_paused
            exc = _EXCEPTION.match(text)
            if exc is None and (as_repr := _EXCEPTION_REPR.match(text)):
                text = f"{as_repr.group('type')}: {as_repr.group('msg')}"
                exc = _EXCEPTION.match(text)
            if exc is None and (uncaught := _UNCAUGHT.search(text)) is not None:
                said = text[uncaught.end() :]
                if (fatal := _EXCEPTION.match(said)) is not None and _python_type(fatal.group("type")):
                    self._exception(i, raw, said, prefix_rank, fatal, None)
                    return i + 1
            if exc and _python_type(exc.group("type")):
                # An exception line with no traceback before it: its type and message still speak, but
                # what printed it may have gone on (a handler that logs it): a warning, which a later
                # specific error or exit of another kind outweighs. Quoted the other way round, with the
                # frame that raised it under it and no exception after that frame (case 794), the frame
                # says where it was raised.
                frame, after = self._frames_after(i + 1)
                if (
                    frame is None
                    and exc.group("type").rsplit(".", 1)[-1] == "KeyError"
                    and _CHECKPOINT_ENTRY.search(self._line_before(i, _LinePrefix("")))
                ):
                    self._add(i, raw, prefix_rank, "checkpoint_load_error", "root", 0.7, 52, "checkpoint-entry-missing")
                    return after
                under = view.get(i + 1) if frame is None else None
                jar = _JAVA_JAR_FRAME.match(normalize(under)[0]) if under is not None else None
                self._exception(
                    i, raw, text, prefix_rank, exc, frame, severity="error", alone=True, library_frame=jar is not None
                )
                return after
            else:
                self._line(i, raw, text, prefix_rank)
                self._reboot(i, raw)
            return i + 1
        if (rest := text[header.end() :]) and self._inline_traceback(i, raw, rest, prefix_rank):
            return i + 1
        # Python's "Exception ignored in: ..." tracebacks (a destructor failing during shutdown) are noise.
        before = view.get(i - 1)
        ignored = before is not None and normalize(before)[0].startswith("Exception ignored in")
        # IPython's header names the exception before the word Traceback ("RayTaskError(PermissionError)
        # Traceback (most recent call last)"), and its final line may never come: read the header too.
        if head := text[: header.start()].strip():
            self._line(i, raw, head, prefix_rank)
        for at, line in ((i - 1, before), (i, text[: header.start()])):
            if line is not None and _LOSS_DIVERGED.search(line):
                self._add(
                    at,
                    view.get(at) or line,
                    prefix_rank,
                    "loss_divergence",
                    "root",
                    0.7,
                    57,
                    "loss-diverged-before-traceback",
                )
                break
        named = head if head and _IPYTHON_HEAD.match(text[: header.start()]) else None
        return self._traceback(i, i + 1, ignored=ignored, prefix=text[: header.start()], named=named)

    def _julia(self, i: int, raw: str, text: str, rank: int | None, error: re.Match[str]) -> int | None:
        """Julia's uncaught exception at line ``i``, when a "Stacktrace:" follows its message: judged by its
        message's rules, else by the first frame past the language's own (a package's: framework error;
        the script's: script error). The index after the stacktrace, or None (not Julia's: scan on)."""
        view = self.view
        j = i + 1
        while (line := view.get(j)) is not None and not _JULIA_STACKTRACE.match(line):
            if j >= i + 60 or line.startswith("ERROR: ") or _TRACEBACK.search(line):
                return None
            j += 1
        if line is None:
            return None
        caller: str | None = None
        k = j + 1
        while (line := view.get(k)) is not None and k < j + _MAX_TRACEBACK:
            frame = _JULIA_FRAME.match(line)
            if frame:
                where = frame.group("old") or frame.group("path")
                module = frame.group("module") or ""
                if caller is None and not (_JULIA_OWN.search(module) or _JULIA_OWN.search(where)):
                    caller = f"{module} {where}".strip()
            elif not _JULIA_FRAME_HEAD.match(line):
                break
            k += 1
        if self._line(i, raw, text, rank, "fatal"):
            return k  # the message itself says what happened (GPU memory, a CUDA error, ...)
        name = error.group("type").rsplit(".", 1)[-1]
        in_package = caller is None or _JULIA_PACKAGE.search(caller) is not None
        reason = "framework_error" if in_package else "script_error"
        self._add(i, raw, rank, reason, "root", 0.75 if caller else 0.6, 50, f"julia-{name}", "fatal")
        return k

    def _frames_after(self, first: int) -> tuple[str | None, int]:
        """The frames right under an exception line, when they end with no exception of their own: the
        path of the last one and the index after them; else (None, ``first``), the lines left to the scan."""
        last: str | None = None
        j = first
        while (line := self.view.get(j)) is not None and j < first + _MAX_TRACEBACK:
            text, _ = normalize(line)
            frame = _FRAME.match(text)
            if frame:
                last = _frame_path(frame)
            elif last is None or _EXCEPTION.match(text) or _TRACEBACK.search(text):
                return None, first  # no frame under it, or frames that lead to an exception of their own
            elif not (text.startswith((" ", "\t")) or line.startswith((" ", "\t")) or _TRACEBACK_BODY.match(text)):
                break
            j += 1
        return (last, j) if last is not None else (None, first)

    def _cut_assertion(self, i: int, code: str, frame: str, caller: str | None) -> None:
        """A traceback cut after its last frame's assert statement, judged as its AssertionError would be."""
        line = self.view.get(i)
        if line is None:
            return
        rank = normalize(line)[1]
        said = _assertion(code)
        if said is not None:
            self._add(i, line, rank, said[0], "root", 0.7, said[2], said[1], "error")
            return
        exc = _EXCEPTION.match("AssertionError")
        assert exc is not None
        self._exception(i, line, "AssertionError", rank, exc, frame, caller=caller, severity="error")

    def _inline_traceback(self, i: int, raw: str, rest: str, rank: int | None) -> bool:
        """A whole traceback on the line of its header: its line breaks lost to spaces (a pasted report, a
        platform's log view: Polyaxon's scheduler, case 1631) or escaped as "\\n" (a JSON log). Judged by its last
        exception and the frame before it; False when the rest of the line holds no frame."""
        rest = rest.replace("\\n", "\n").replace('\\"', '"')
        frames = list(_INLINE_FRAME.finditer(rest))
        if not frames:
            return False
        k, last, tail = len(frames), None, ""
        while last is None and k > 0:
            # The last exception after a frame: the final one, or when the line was cut before it, the one a chained
            # traceback's earlier part raised (Cloud ML's job status: "...UnavailableError: Stream removed During
            # handling of the above exception, another exception occurred: Traceback ... File ...", case 3278).
            k -= 1
            tail = rest[frames[k].end() : frames[k + 1].start() if k + 1 < len(frames) else len(rest)]
            for found in _INLINE_EXCEPTION.finditer(tail):
                last = found
        if last is None:
            return False
        message = _CHAINED.split(tail[last.end() :].strip(), maxsplit=1)[0].splitlines()
        exc = _EXCEPTION.match(f"{last.group('type')}: {message[0] if message else ''}")
        if exc is None:
            return False
        caller = frames[k - 1].group("path") if k > 0 else None
        self._exception(i, raw, exc.group(0), rank, exc, frames[k].group("path"), caller=caller)
        return True

    def _debugger_report(self, i: int, raw: str, head: re.Match[str]) -> int | None:
        """VS Code's (debugpy's) account of an exception: "Exception has occurred: T" over the message, then
        the frames innermost first (case 2300). Judged as a traceback whose last frame is the first shown;
        the index after the message, or None when no message follows."""
        line = self.view.get(i + 1)
        if line is None:
            return None
        message, rank = normalize(line)
        exc = _EXCEPTION.match(f"{head.group('type')}: {message.strip()}")
        if exc is None:
            return None
        frame = None
        for j in range(i + 2, i + 5):
            if (below := self.view.get(j)) is None:
                break
            if found := _FRAME.match(normalize(below)[0]):
                frame = _frame_path(found)
                break
        self._exception(i + 1, line, exc.group(0), rank, exc, frame)
        return i + 2

    def _bare_assertion(self, i: int, text: str) -> int | None:
        """An assert statement whose frames a report cut, followed (over its carets) by its AssertionError
        (case 2142): read as a traceback's raising line is; the index after the exception, or None. Read
        forward from the statement, which the prefilter keeps ("assert "), as a streamed log allows."""
        said = _assertion(text.strip())
        if said is None:
            return None
        for j in range(i + 1, i + 4):
            line = self.view.get(j)
            if line is None:
                return None
            after, rank = normalize(line)
            after = after.strip()
            if _TRACEBACK_BODY.match(after):
                continue
            exc = _EXCEPTION.match(after)
            if exc is None or exc.group("type").rsplit(".", 1)[-1] != "AssertionError":
                return None
            self._add(j, line, rank, said[0], "root", 0.75, said[2], said[1], "error")
            return j + 1
        return None

    def _line_before(self, j: int, strip: _LinePrefix) -> str:
        """The text of the line before ``j`` (the raising line, even when a report cut the frame above it)."""
        line = self.view.get(j - 1) if j > 0 else None
        return strip(normalize(line)[0]).strip() if line is not None else ""

    def _traceback(
        self,
        i: int,
        first: int,
        *,
        ignored: bool = False,
        strict: bool = False,
        prefix: str = "",
        named: str | None = None,
    ) -> int:
        """Follow the traceback that starts at line ``i`` (its frames from line ``first``) to its final
        exception (``named``: the type IPython's header gave, for an excerpt cut before it); return the index
        of the next line to look at. ``strict``: the frames came with no
        header, so anything but a frame, its source line or an exception ends them. ``prefix``: what the
        header line had before "Traceback" (a logger's per-line prefix, see `_LinePrefix`)."""
        view = self.view
        strip = _LinePrefix(prefix)
        last_frame: str | None = None
        caller: str | None = None  # the frame before the last one
        lookup = False  # the last frame is a framework's attribute-lookup hook
        item_lookup = False  # the last frame is a container's __getitem__
        unimplemented = False  # the last frame is torch's stand-in forward of a module without one
        in_loss_code = False  # the last frame is a function named for the run's losses
        model_table = False  # the last frame is transformers' table of model types
        paths: list[str] = []  # every frame's path, in order
        loading = False  # a frame of checkpoint loading was passed
        building = False  # a frame of DeepSpeed's op builder was passed
        from_loader = False  # a frame of the DataLoader's machinery was passed
        from_worker = False  # the DataLoader re-raised a worker's exception
        locating = False  # the last frame is Hydra's _locate
        by_index = False  # a frame of NVML's device lookup by index was passed
        importing = False  # the last frame is a module's body run by an import (a frame called it)
        code: str | None = None  # the source line under the last frame
        code_at = -1  # its index
        last_body = -2  # the last line of the last frame's block (its source line and the carets under it)
        op_caller: str | None = None  # the last frame that is not an op library's own
        wrapped = ""  # the first part of a path rich wrapped onto the next line
        numbered = False  # the last frame is IPython 8's, its source shown as numbered lines
        after_frame = False
        for j in range(first, i + _MAX_TRACEBACK):
            line = view.get(j)
            if line is None:
                raised = _RAISE_STATEMENT.match(code or "") if not ignored and last_frame is not None else None
                if raised is not None:
                    # The excerpt ends on the last frame's raise statement (transformers' "raise ValueError(f\"Can't
                    # find a valid checkpoint at {checkpoint_path}\")", open-r1's resume, case 3021): that exception,
                    # with the statement's literal message, raised at that frame.
                    typed = f"{raised.group('type')}: {raised.group('msg')}"
                    if (exc_cut := _EXCEPTION.match(typed)) is not None:
                        self._exception(
                            code_at,
                            view.get(code_at) or typed,
                            typed,
                            None,
                            exc_cut,
                            last_frame,
                            loading,
                            caller=caller,
                            severity="error",
                        )
                elif not ignored and code is not None and code.startswith("assert") and last_frame is not None:
                    # The excerpt ends on the last frame's assert statement (a report that kept the frame that
                    # raised and not its exception, case 1904): the exception can only be an AssertionError.
                    self._cut_assertion(code_at, code, last_frame, caller)
                elif not ignored and named and last_frame is not None and (exc := _EXCEPTION.match(named)):
                    # IPython's header named the exception and the excerpt ends before its final line (case
                    # 2184): the type its header gave, raised at the last frame.
                    self._exception(i, view.get(i) or named, named, None, exc, last_frame, caller=caller)
                elif (
                    not ignored
                    and last_frame is not None
                    and (cut := _cut_inside(loading or _CHECKPOINT_CALL.search(code or "") is not None, building))
                ):
                    # The excerpt ends inside a frame that names what was under way, with no exception shown
                    # (MMEngine's resume under xtuner, cases 5607, 5608; DeepSpeed's jit_load of its CPU Adam, case
                    # 5504): that, weakly (anything the run printed says more).
                    end = view.get(j - 1) or ""
                    reason, what = cut
                    self._add(j - 1, end, normalize(end)[1], reason, "root", 0.4, 18, f"cut-in-{what}")
                elif not ignored and last_frame is not None and (after_frame or last_body == j - 1):
                    # The excerpt ends inside any other frame (on its header or its source line), its
                    # exception lost (speechbrain's recipe in the user's train_conf.py, case 6034; DeepSpeed's ZeRO
                    # state_dict, case 6075): whose code was running, as an exception raised there would be read;
                    # only when nothing else was found (a cascade, a warning that outweighs nothing).
                    end = view.get(j - 1) or ""
                    inside = self.rules.frameworks.path(last_frame)
                    reason, what = ("framework_error", "framework") if inside else ("script_error", "script")
                    self._add(
                        j - 1, end, normalize(end)[1], reason, "cascade", 0.35, 15, f"cut-in-{what}", "warning", False
                    )
                break
            text, rank = normalize(line)
            text = strip(text)
            frame = _FRAME.match(text)
            if not frame and (head := _RICH_WRAPPED.match(text)) is not None:
                wrapped = head.group(1)
                continue
            if frame and _RAISE_FROM_FRAME.match(text):
                continue
            if frame:
                importing = (
                    _IMPORTING_FRAME.search(text) is not None
                    and last_frame is not None
                    and not _RUNPY_FRAME.search(last_frame)
                )
                caller, last_frame = last_frame, _frame_path(frame)
                if wrapped and frame.group("rich") and not last_frame.startswith(("/", "~")):
                    last_frame = wrapped + last_frame
                wrapped = ""
                numbered = bool(frame.group("ipy8"))
                paths.append(last_frame)
                if not _OP_LIBRARY_FRAME.search(last_frame):
                    op_caller = last_frame
                if _RERAISE_FRAME.search(text):
                    last_frame = None
                lookup = _LOOKUP_FRAME.search(text) is not None
                model_table = _MODEL_TYPE_TABLE.search(text) is not None
                item_lookup = _ITEM_FRAME.search(text) is not None
                unimplemented = _UNIMPLEMENTED_FORWARD.search(text) is not None
                in_loss_code = _LOSS_FUNCTION_FRAME.search(text) is not None
                loading = loading or _CHECKPOINT_FRAME.search(text) is not None
                building = building or _OP_BUILD_FRAME.search(text) is not None
                from_loader = from_loader or _LOADER_FRAME.search(text) is not None
                from_worker = from_worker or _WORKER_RERAISE.search(text) is not None
                from_worker = from_worker or _DATA_WORKER_FRAME.search(text) is not None
                by_index = by_index or _BY_INDEX_FRAME.search(text) is not None
                locating = _LOCATE_FRAME.search(text) is not None
                code, after_frame = None, True
                continue
            if by_index and _NVML_INVALID_ARGUMENT.match(text):
                if not ignored:
                    self._add(j, line, rank, "argument_error", "root", 0.75, 60, "nvml-device-index", "fatal")
                return j + 1
            exc = _EXCEPTION.match(text)
            if exc:
                name = exc.group("type").rsplit(".", 1)[-1]
                if not ignored and locating and name in _LOCATE_EXCEPTIONS:
                    self._add(j, line, rank, "import_error", "root", 0.8, 59, "hydra-locate-target", "fatal")
                elif not ignored and name == "AssertionError" and (said := _assertion(code)) is not None:
                    self._add(j, line, rank, said[0], "root", 0.75, said[2], said[1], "fatal")
                elif not ignored and name == "IndexError" and _DEVICE_LIST_INDEX.search(self._line_before(j, strip)):
                    self._add(j, line, rank, "argument_error", "root", 0.75, 60, "device-list-index", "fatal")
                elif not ignored and item_lookup and name == "RecursionError":
                    # Round 57B: a dataset's __getitem__ that retries another index for a sample it rejects
                    # ("return self.__getitem__(...)"), until the interpreter's depth runs out: nearly every sample is
                    # rejected (DDSP-SVC's clips shorter than its waveform_sec, case 2884): the data's.
                    self._add(j, line, rank, "dataloader_error", "root", 0.75, 52, "dataset-retry-recursion", "fatal")
                elif not ignored and in_loss_code and name == "ValueError" and _NAN_TO_INT.search(text):
                    self._add(j, line, rank, "loss_divergence", "root", 0.7, 58, "nan-in-loss-code", "fatal")
                elif not ignored and unimplemented and name == "NotImplementedError":
                    self._add(j, line, rank, "script_error", "root", 0.75, 52, "module-without-forward", "fatal")
                elif (
                    not ignored
                    and importing
                    and name == "AttributeError"
                    and _MODULE_LACKS.match(exc.group("msg") or "")
                ):
                    self._add(j, line, rank, "import_error", "root", 0.75, 59, "import-time-missing-name", "fatal")
                elif (
                    not ignored
                    and importing
                    and name == "NameError"
                    and last_frame is not None
                    and self.rules.frameworks.path(last_frame)
                ):
                    self._add(j, line, rank, "import_error", "root", 0.7, 59, "import-time-undefined-name", "fatal")
                elif not ignored and model_table and name == "KeyError":
                    rule = "transformers-model-type-unknown"
                    self._add(j, line, rank, "import_error", "root", 0.75, 59, rule, "fatal")
                elif not ignored:
                    frame_of = caller if lookup and exc.group("type").endswith("AttributeError") else last_frame
                    if (
                        item_lookup
                        and name == "KeyError"
                        and caller is not None
                        and last_frame is not None
                        and self.rules.frameworks.path(last_frame)
                    ):
                        frame_of = caller
                    if code is not None and _LOOP_LINE.match(code):
                        from_loader = True
                    if frame_of is not None and _DISPATCH_FRAME.search(frame_of) and _DISPATCH_CODE.match(code or ""):
                        frame_of = None  # cut after torch's dispatch to forward: the raising frame is not shown
                    if (
                        frame_of is not None
                        and _DECORATOR_FRAME.search(frame_of)
                        and _DECORATOR_CODE.match(code or "return func(")
                    ):
                        frame_of = None  # cut after torch's no_grad decorator: the raising frame is not shown
                    self._exception(
                        j,
                        line,
                        text,
                        rank,
                        exc,
                        frame_of,
                        loading,
                        from_loader=from_loader,
                        from_worker=from_worker,
                        op_caller=op_caller,
                        caller=caller,
                        outer=_outside_package(paths, self.rules.frameworks),
                        bare=_BARE_RAISE.match(code or "") is not None,
                    )
                return j + 1
            if (
                not after_frame
                and code is not None
                and j == last_body + 1
                and last_frame is not None
                and _UNTYPED_MESSAGE.match(text)
                and view.get(j + 1) is None
            ):
                # The excerpt ends on a sentence under the last frame's source line: the final exception's
                # line with its type lost (a report that pasted the issue's title under the frames).
                if not ignored:
                    opened = _OPEN_RAISE.match(code)
                    typed = f"{opened.group('type') if opened else 'Exception'}: {text}"
                    self._exception(
                        j,
                        line,
                        typed,
                        rank,
                        _EXCEPTION.match(typed),  # type: ignore[arg-type]
                        last_frame,
                        loading,
                        from_loader=from_loader,
                        from_worker=from_worker,
                        op_caller=op_caller,
                        caller=caller,
                    )
                return j + 1
            if _TRACEBACK_BODY.match(text) and last_body == j - 1:
                last_body = j  # carets under the source line: still right under it
            if after_frame and not _TRACEBACK_BODY.match(text):
                code, code_at, after_frame = text, j, False
                last_body = j
            elif strict and not (
                _TRACEBACK_BODY.match(text) or _RICH_BOX.match(text) or (numbered and _IPYTHON_CONTEXT.match(text))
            ):
                return j  # not a traceback's line: the scan goes on from it
            if self.rules.prefilter(line):
                self._line(j, line, text, rank)
        # No final exception. After a header the scan goes back over what was walked, as it always has;
        # frames without one were all read (their lines are frames, source lines and carets), so the
        # scan goes on after them rather than walk them again from each frame.
        return j + 1 if strict else i + 1

    def _reboot(self, i: int, raw: str) -> None:
        """A node that rebooted under the run, known only by its syslog or kernel log: the first line of a
        boot (the kernel's banner, systemd's module loading, journalctl's "-- Reboot --") after a line that
        came at least a minute earlier (the machine was down) or a kernel clock that went back to zero, with
        no training progress after it in the file. A log that starts with a boot (dmesg since boot) or that
        the run went on writing after one is not a reboot under the run. Weak: any specific error outranks it."""
        if not _BOOT.search(raw):
            return
        before = self.view.get(i - 1)
        if before is None or _BOOT.search(before):
            return
        if not raw.lstrip().startswith("-- "):  # journalctl's marker is one by itself
            then, now = _clock(before), _clock(raw)
            if then is None or now is None or then[0] != now[0] or not (now[1] - then[1] >= 60 or now[1] < then[1]):
                return
        if self.view.first_progress(i + 1) is None:
            self._add(i, raw, None, "node_failure", "root", 0.6, 30, "host-rebooted", "exit")

    def _root_cause_line(self, text: str) -> bool:
        if m := _ROOT_CAUSE_RANK.match(text):
            self.root_rank = self.root_rank if self.root_rank is not None else int(m.group(1))
        elif m := _ROOT_CAUSE_HOST.match(text):
            self.root_host = self.root_host or m.group(1)
        return not text.startswith("=====") or self.root_rank is None

    def _line(self, i: int, raw: str, text: str, rank: int | None, severity: str = "error") -> list[Candidate]:
        """Candidates from one line; ``severity`` is what its place says (a traceback's final exception
        is fatal), lowered to a warning when the line says it is one, raised by a rule that knows better."""
        if self.failed_rank is None and (failed := _FAILED_LOCAL_RANK.search(text)):
            self.failed_rank = int(failed.group(1) or failed.group(2))
        if severity == "error" and _WARNING_LEVEL.search(raw[:80]):
            severity = "warning"
        matched = self.rules.match_at(text)
        # Advice or a warning tag on the line ("CUDA kernel errors might be asynchronously reported ...",
        # "UserWarning:") covers what follows it, not the message before it that one-line wordings glue on.
        advice_at = min((at for rule, at in matched if rule.role == "ignore"), default=len(text) + 1)
        added = []
        code = xid_code(text)
        if code is not None and XID_LINE.search(text).start() < advice_at:  # type: ignore[union-attr]
            reason = xid_reason(code)
            if reason is not None:
                added.append(self._add(i, raw, rank, reason, "root", 0.95, 100, f"xid-{code}", "fatal"))
            elif code in APPLICATION_XIDS:
                added.append(self._add(i, raw, rank, "cuda_error", "cascade", 0.5, 25, f"xid-{code}"))
        for rule, at in matched:
            if rule.role == "ignore" or at >= advice_at:
                continue
            sev = _severity(rule.severity, severity)
            added.append(self._add(i, raw, rank, rule.reason, rule.role, rule.confidence, rule.priority, rule.id, sev))
        return added

    def _exception(
        self,
        i: int,
        raw: str,
        text: str,
        rank: int | None,
        exc: re.Match[str],
        frame: str | None,
        loading: bool = False,
        *,
        from_loader: bool = False,
        from_worker: bool = False,
        severity: str = "fatal",
        alone: bool = False,
        op_caller: str | None = None,
        caller: str | None = None,
        outer: str | None = None,
        library_frame: bool = False,
        bare: bool = False,
    ) -> None:
        """A traceback's final exception (``severity`` fatal), or an exception line met ``alone``, with no
        traceback (error: a rule that knows its message says how bad it is; by its type, a warning)."""
        name = exc.group("type").rsplit(".", 1)[-1]
        msg = (exc.group("msg") or "").strip()
        if from_loader and (name in _LOADER_EXCEPTIONS or _RAN_DRY.search(msg)):
            # The loop's iterator failed: a worker that went away, a dataset generator run dry.
            self._add(i, raw, rank, "dataloader_error", "root", 0.7, 58, f"loader-{name}", _severity("error", severity))
            return
        if (
            op_caller is not None
            and _framework_caller(op_caller, self.rules.frameworks)
            and any(rule.id in _CALLER_SHAPE_RULES for rule, _ in self.rules.match_at(text))
        ):
            self._add(i, raw, rank, "framework_error", "root", 0.75, 51, "layer-input-shape-in-framework", severity)
            return
        if name == "KeyError" and _H5_MISSING.search(msg):
            reason, rule = (
                ("checkpoint_load_error", "h5-object-missing-checkpoint")
                if loading
                else ("dataloader_error", "h5-object-missing")
            )
            self._add(i, raw, rank, reason, "root", 0.7, 52, rule, _severity("error", severity))
            return
        if (
            name == "UnicodeDecodeError"
            and frame is not None
            and caller is not None
            and _CODECS_FRAME.search(frame)
            and _DATA_CODE.search(caller)
        ):
            self._add(i, raw, rank, "dataloader_error", "root", 0.75, 58, "dataset-decode", severity)
            return
        if (
            name == "ValueError"
            and _EMPTY_DATA.search(msg)
            # with no frame shown at all, the run's likeliest empty collection is its data (round 200's session:
            # RandLA-Net's "attempt to get argmin of an empty sequence" after an empty S3DIS batch, case 2962)
            and (
                frame is caller is outer is None
                or any(p is not None and _DATA_CODE.search(p) for p in (frame, caller, outer))
            )
        ):
            self._add(i, raw, rank, "dataloader_error", "root", 0.7, 52, "empty-data", severity)
            return
        if from_worker and frame is not None and _WORKER_RECEIVE_FRAME.search(frame):
            self._add(i, raw, rank, "dataloader_error", "root", 0.75, 62, "loader-worker-receive", severity)
            return
        if from_worker and _WORKER_CUDA_INIT.search(msg):
            self._add(i, raw, rank, "dataloader_error", "root", 0.75, 62, "loader-worker-cuda-init", severity)
            return
        if self._line(i, raw, text, rank, severity):
            return  # the message itself says what happened (CUDA error, NCCL error, OOM, ...)
        if name in _CASCADE_EXCEPTIONS or (name == "Exception" and not msg and not bare):
            return  # someone else's failure; a bare Exception: with its message on the lines after (mp.spawn)
        if name == "ValueError" and frame is not None and _LAUNCHER_FRAME.search(frame):
            self._add(i, raw, rank, "argument_error", "root", 0.7, 50, "launcher-refused-input", severity)
            return
        if frame is not None and name not in _WORKER_OWN_REASONS and _DATA_LIBRARY_FRAME.search(frame):
            self._add(i, raw, rank, "dataloader_error", "root", 0.7, 52, "data-library-raised", severity)
            return
        if from_worker and name not in _WORKER_OWN_REASONS:
            # A worker's exception the loader handed on, its message known to no rule: the data's.
            self._add(i, raw, rank, "dataloader_error", "root", 0.75, 58, "loader-worker-reraise", severity)
            return
        # With no frame (or only one that re-raises), the type decides.
        frameworks = self.rules.frameworks
        in_framework = library_frame or (
            name in _FRAMEWORK_TYPES or _framework_type(exc.group("type"), frameworks)
            if frame is None
            else frameworks.path(frame)
        )
        if in_framework and frame is not None and _application_bug(name, msg, frame, frameworks):
            in_framework = False
        if in_framework and frame is not None and _library_refused_caller(name, frame, outer or caller, frameworks):
            in_framework = False
        reason = "framework_error" if in_framework else "script_error"
        if in_framework and loading and name in _CHECKPOINT_EXCEPTIONS:
            reason = "checkpoint_load_error"
        specific = bool(msg)
        if alone:
            # Known only by its type, and printed by something that may have gone on: not evidence when
            # training went on after it; else a warning below every other signature, a launcher's account
            # of the exit included, so that it is the answer only when nothing else is.
            if self.view.first_progress(i + 1) is None:
                self._add(i, raw, rank, reason, "root", 0.5, 9, f"exception-{name}", "warning", specific)
        elif name in _SCRIPT_EXCEPTIONS:
            confidence = 0.75 if in_framework or name not in ("RuntimeError", "AssertionError") else 0.65
            self._add(i, raw, rank, reason, "root", confidence, 50, f"exception-{name}", severity, specific)
        elif name.endswith(("Error", "Exception")) or re.match(r"[1-5]\d\d\b", exc.group("msg") or ""):
            self._add(i, raw, rank, reason, "root", 0.6, 45, f"exception-{name}", severity, specific)

    def _add(
        self,
        i: int,
        raw: str,
        rank: int | None,
        reason: str,
        role: str,
        confidence: float,
        priority: int,
        rule_id: str,
        severity: str = "error",
        specific: bool = True,
        *,
        last: bool = False,
    ) -> Candidate:
        """A candidate at line ``i``; ``last``: a line of the log's tail, read once the scan is over, after which
        nothing follows it (no progress to look for)."""
        candidate = Candidate(
            reason=reason,
            role=role,
            confidence=confidence,
            priority=priority,
            rule_id=rule_id,
            evidence=Evidence(self.source.file, i + 1, raw.rstrip("\r\n")[:2000]),
            node=self.node or syslog_host(raw) or _node_in_text(raw, reason),
            rank=self.source.rank if self.source.rank is not None else rank,
            when=_timestamp(raw),
            position=float(i),  # made a fraction of the file by scan()
            severity=severity,
            specific=specific,
        )
        self.found.append(candidate)
        if role == "root":  # what came after it, while the view still holds those lines
            self.progress[i + 1] = None if last else self.view.first_progress(i + 1)
        return candidate


class _LinePrefix:
    """What a logger wrote before a traceback's header, when it writes the same before every line of it
    (a cloud's "<time> workerpool0-0 ", pdsh's "worker-3: ", a host and a program name; digits may change
    from line to line, as in a sequence number): taken off each line of the traceback, so its frames and
    its final exception are read. A header with a word before it and no separator after (IPython's
    "ZeroDivisionError      Traceback ...") has no prefix: its final line starts with that word."""

    def __init__(self, head: str) -> None:
        self.head = head if head.strip() and not head[-1].isalnum() and not _IPYTHON_HEAD.match(head) else ""
        self.shape = _DIGITS.sub("0", self.head)

    def __call__(self, text: str) -> str:
        n = len(self.head)
        if n and (text.startswith(self.head) or _DIGITS.sub("0", text[:n]) == self.shape):
            return text[n:].strip()
        return text


_DIGITS = re.compile(r"\d")
# IPython's "<ExceptionName>   Traceback (most recent call last)": the exception's name, then spaces.
_IPYTHON_HEAD = re.compile(r"^[A-Za-z_][\w.]*(?:\([\w.]+\))?\s{2,}$")


# The first lines of a boot, as syslog, kern.log, dmesg and journalctl keep them.
_BOOT = re.compile(
    r"\bLinux version \d+\.\d+[\w.+~-]* \(|\bCommand line: BOOT_IMAGE=|\bBooting Linux on physical CPU"
    r"|systemd-modules-load\[\d+\]: Inserted module '|systemd\[1\]: systemd \d+\S* running in system mode"
    r"|rsyslogd: \[origin software=\"rsyslogd\"[^\]]*\] start$|^\s*-- (?:Reboot|Boot [0-9a-f]{32}) --\s*$"
)
_SYSLOG_CLOCK = re.compile(r"^([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2})\b")
_KERNEL_CLOCK = re.compile(r"\[\s*(\d+)\.\d+\]")
_MONTHS = {
    m: n for n, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)
}


def _clock(line: str) -> tuple[str, float] | None:
    """The line's own clock and its seconds, to compare two lines of one log: an ISO or a syslog timestamp
    (a syslog year is unknown: the same for both), else the kernel's seconds since boot."""
    if (when := _timestamp(line)) is not None:
        return "iso", when.timestamp()
    if (m := _SYSLOG_CLOCK.match(line)) and m.group(1) in _MONTHS:
        month, day, hh, mm, ss = _MONTHS[m.group(1)], int(m.group(2)), *map(int, m.group(3, 4, 5))
        return "syslog", float((((month * 31 + day) * 24 + hh) * 60 + mm) * 60 + ss)
    if m := _KERNEL_CLOCK.search(line[:80]):
        return "kernel", float(m.group(1))  # seconds since boot: back to 0 at a boot
    return None


_BUILTIN_EXCEPTIONS = frozenset(
    name for name, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
)


def _python_type(name: str) -> bool:
    """Whether an exception line's type is one Python prints: a builtin, or a class named with its module
    (``torch.OutOfMemoryError``), not a tag of another program's log ("LustreError: 11-0: ...")."""
    return "." in name or name in _BUILTIN_EXCEPTIONS


def _severity(of_rule: str, of_line: str) -> str:
    """A rule's own severity, where it has one, over the line's: an exit is an exit wherever it is
    written, a traceback's final exception is fatal whatever the rule thinks of its words."""
    if of_rule == "exit" or of_line == "fatal":
        return "exit" if of_rule == "exit" else "fatal"
    return of_line if of_rule == "error" else of_rule


def _node_in_text(raw: str, reason: str) -> str | None:
    if reason != "node_failure":
        return None
    m = _NODE_IN_TEXT.search(raw)
    return next((g for g in m.groups() if g), None) if m else None


def _same_process(a: Candidate, b: Candidate) -> bool:
    return a.rank is None or b.rank is None or a.rank == b.rank


def _outweighs(later: Candidate, c: Candidate) -> bool:
    """Whether ``later`` says that ``c``, a warning, did not end the run: a specific error, a fatal
    exception or an exit of another kind (an exception that says nothing but its type does not)."""
    return later.severity in ("error", "fatal", "exit") and later.specific


# What makes a later CUDA fault in the same process its consequence (`_weigh`): which candidates, whether one
# on the fault's own line counts, and the words added to the fault's rule id.
_CUDA_FAULT_CAUSES: tuple[tuple[Callable[[Candidate], bool], bool, str], ...] = (
    (lambda c: c.reason == "network_error", False, "after a network error"),
    (lambda c: c.reason == "loss_divergence", True, "after the loss diverged"),
    (lambda c: c.rule_id == "cuda-device-assert", False, "after a kernel assertion"),
)


def _weigh(
    found: list[Candidate], total: int, progress: Mapping[int, int | None], end: Candidate | None = None
) -> list[Candidate]:
    """Root candidates of one file that the run went on from, made cascades (the answer only when nothing
    else is): one that a later candidate of another reason in the same process follows, with training
    progress (a step or iteration line, a tqdm bar) between them (an OOM caught and retried, a transient
    error), or, for a warning, that a later specific error or exit outweighs (a "size mismatch" a loader
    that is not strict only reports). ``end`` is how the process ended when the collector knows it
    (its exit status): it comes after every line. ``progress`` maps a root candidate's line to the first
    line of training progress after it (within `PROGRESS_WINDOW`), ``total`` is the file's line count."""
    later_ones = sorted(
        (c for c in found if c.evidence.line > 0 and (c.role == "root" or c.severity == "exit")),
        key=lambda c: c.evidence.line,
    )
    if end is not None:
        later_ones.append(replace(end, evidence=replace(end.evidence, line=total + 1)))
    out = list(found)
    for k, c in enumerate(out):
        if c.role != "root" or c.evidence.line <= 0:
            continue
        after = [d for d in later_ones if d.evidence.line > c.evidence.line and d.reason != c.reason]
        after = [d for d in after if _same_process(c, d)]
        if not after:
            continue
        survived = c.severity == "warning" and any(_outweighs(d, c) for d in after)
        # A kernel that failed its own assertion leaves the CUDA context broken for good: no step after it can
        # have run on the GPU, so a progress line printed after it is output the assertion overtook (the device
        # prints asynchronously), not a run that went on (round 16: WaveRNN's NLL assertions, then a progress
        # line and CUDNN_STATUS_EXECUTION_FAILED, case 1447).
        if not survived and after[0].role == "root" and _worker_cause(c, after[0]):
            continue
        if not survived and after[0].role == "root" and c.rule_id != "cuda-device-assert":
            went_on = progress.get(c.evidence.line)
            survived = went_on is not None and went_on < after[0].evidence.line
        if survived:
            # Below every other cascade too: what the run went on from says less of how it ended than any line
            # about the end (torch's driver warning, then the CPU run's "Floating point exception", case 1562).
            out[k] = replace(c, role="cascade", rule_id=f"{c.rule_id} (survived)", priority=0)
    # A CUDA fault in one process after a failure that breaks what the GPU is given is its consequence, when
    # that failure was not survived: a transfer that failed on the wire leaves the GPU work it fed broken (a
    # GPU that faults first makes its peers' network errors, which come after it, and still outranks them); a
    # loss that diverged leaves values no kernel expects, NaN boxes and indices out of range (round 11A, case
    # 1032); a kernel that failed its own assertion leaves the context broken, and the next call fails with a
    # CUDA or cuDNN error (round 12B: PaddleSeg's label assertion, then CUDNN_STATUS_EXECUTION_FAILED, 1125).
    for is_cause, same_line, why in _CUDA_FAULT_CAUSES:
        causes = [c for c in out if c.role == "root" and is_cause(c) and c.evidence.line > 0]
        for k, c in enumerate(out):
            if c.role != "root" or c.reason != "cuda_error" or c.evidence.line <= 0:
                continue
            limit = c.evidence.line + 1 if same_line else c.evidence.line  # a cause before the fault (or on its line)
            if any(d.evidence.line < limit and _same_process(d, c) for d in causes):
                out[k] = replace(c, role="cascade", rule_id=f"{c.rule_id} ({why})")
    return out


# Round 42A: a storage fault that a DataLoader worker printed before the loader reported that worker's failure
# (sox's "can't open input file `...wav': Input/output error", then "Caught RuntimeError in DataLoader worker
# process 28." with the worker's own traceback cut, AST's ESC-50 recipe, case 2420): the
# training lines between them are the main process's steps on the batches other workers had made, not a run
# that went on from the fault, which is the worker's cause.
_WORKER_FAILURES = frozenset({"dataloader", "loader-worker-reraise"})
_WORKER_CAUSES = frozenset({"storage_error"})


def _worker_cause(c: Candidate, failure: Candidate) -> bool:
    """Whether ``c`` is a fault a DataLoader worker printed before ``failure``, the loader's report of it."""
    return c.reason in _WORKER_CAUSES and failure.rule_id in _WORKER_FAILURES


def _from_exit(source: LogSource) -> Candidate | None:
    """What an exit status says on its own (weak: only when the text says nothing)."""
    ev = Evidence(source.file, 0, f"exit code {source.exit_code}, signal {source.signal}")
    if source.exit_code == 137 or source.signal == 9:
        return Candidate("host_oom", "root", 0.55, 10, "exit-sigkill", ev, source.node, source.rank, None, 1.0, "exit")
    if source.exit_code == 143 or source.signal == 15:
        return Candidate(
            "preempted", "cascade", 0.5, 10, "exit-sigterm", ev, source.node, source.rank, None, 1.0, "exit"
        )
    return None


def _sort_key(c: Candidate, root_rank: int | None) -> tuple[float, ...]:
    boost = 5 if root_rank is not None and c.rank == root_rank else 0
    when = c.when.timestamp() if c.when is not None else float("inf")
    return (-(c.priority + boost), when, c.position)


def scan(sources: Iterable[LogSource], rules_dir: str | None = None) -> tuple[list[Candidate], int | None, str | None]:
    """Every candidate in every source, and the root rank and host a torchrun summary named."""
    rules = _ruleset(rules_dir)
    found: list[Candidate] = []
    root_rank: int | None = None
    root_host: str | None = None
    failed_rank: int | None = None
    for source in sources:
        scanner = _Scanner(source, rules)
        scanner.scan()
        exit_candidate = _from_exit(source)
        weigh = len(scanner.found) > 1 or (scanner.found and exit_candidate is not None)
        found += _weigh(scanner.found, scanner.total, scanner.progress, exit_candidate) if weigh else scanner.found
        root_rank = root_rank if root_rank is not None else scanner.root_rank
        failed_rank = failed_rank if failed_rank is not None else scanner.failed_rank
        root_host = root_host or scanner.root_host
        if exit_candidate is not None:
            found.append(exit_candidate)
    return found, root_rank if root_rank is not None else failed_rank, root_host


def diagnose_rules(sources: list[LogSource], rules_dir: str | None = None) -> Diagnosis:
    """The rules' diagnosis of one run's logs (no network, no LLM)."""
    found, root_rank, root_host = scan(sources, rules_dir)
    if not found:
        return Diagnosis("unknown", 0.0, "none", explanation="no known failure signature in the logs")
    roots = [c for c in found if c.role == "root"]
    pool = roots or found
    best = min(pool, key=lambda c: _sort_key(c, root_rank))
    same = sorted(
        (c for c in found if c.reason == best.reason and c is not best), key=lambda c: _sort_key(c, root_rank)
    )
    evidence = tuple(dict.fromkeys([best.evidence, *(c.evidence for c in same)]))[:MAX_EVIDENCE]
    consequences = sorted({c.reason for c in found if c.reason != best.reason})
    rank = best.rank if best.rank is not None else root_rank
    node = best.node or (root_host if rank is not None and rank == root_rank else None)
    explanation = f"{best.rule_id} matched {best.evidence.file}:{best.evidence.line}"
    if consequences:
        explanation += f"; also seen, taken as consequences: {', '.join(consequences)}"
    return Diagnosis(
        reason=best.reason,
        confidence=best.confidence,
        source="rules",
        evidence=evidence,
        node=node,
        rank=rank,
        explanation=explanation,
        rule_id=best.rule_id,
    )
