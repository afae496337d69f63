"""Classes of misses from issue 19's ninth round, batch B (corpus cases 883-920: recommender, tabular,
time-series and graph libraries, the core frameworks and notebook platforms): native libraries' errors
carried by the library's own Python exception (CatBoost, LightGBM, DGL, XLA), installations and runtimes
with no GPU to use, libraries refusing a setting in words that name it, input pipelines in their own words
(tf.data's Python functions, HugeCTR's readers), IPython 8's traceback frames, checkpoint resumption in
Chainer's serializers, glog's handler for other signals, the MPS allocator and a path a C++ program could
not open. Error messages are verbatim from the public reports named in each test; hosts, paths and pids may
be made up."""
# ruff: noqa: E501

from __future__ import annotations

from gpuwatch.diagnosis.engine import diagnose_rules
from gpuwatch.diagnosis.model import LogSource


def _src(name: str, text: str) -> LogSource:
    return LogSource(file=name, lines=text.strip("\n").splitlines())


def _diagnose(text: str, name: str = "train.log") -> str:
    return diagnose_rules([_src(name, text)]).reason


# ---------------------------------------------------------------- where an exception was raised

# NVIDIA-Merlin/models#382 (case 883): IPython 8 writes a frame as "File /path.py:207, in f(...)"; the last
# one is keras' own multi_gpu_utils.py, so the TypeError is the framework's, not the cell's.
_MERLIN_IPYTHON8 = """
---------------------------------------------------------------------------
TypeError                                 Traceback (most recent call last)
Input In [4], in <cell line: 10>()
      1 model = mm.DLRMModel(
      2     train.schema,
   (...)
      9 )
---> 10 model = multi_gpu_model(model, gpus=2)

File /usr/local/lib/python3.8/dist-packages/tensorflow/python/keras/utils/multi_gpu_utils.py:207, in multi_gpu_model(model, gpus, cpu_merge, cpu_relocation)
    204   with ops.device('/cpu:0'):
    205     model = clone_model(model)
--> 207 all_outputs = [[] for _ in range(len(model.outputs))]
    209 # Place a copy of the model on each GPU,

TypeError: object of type 'NoneType' has no len()
"""

# The same exception in the notebook's own cell, with no framework frame after it: the script's.
_CELL_ONLY = """
---------------------------------------------------------------------------
TypeError                                 Traceback (most recent call last)
Input In [4], in <cell line: 10>()
---> 10 n = len(model.outputs)

TypeError: object of type 'NoneType' has no len()
"""

# dhgrs/chainer-WaveGlow#4 (case 897): resuming a trainer from a snapshot of another dataset; Chainer's
# npz deserializer cannot fit the saved iterator order into the new one.
_CHAINER_RESUME = """
Traceback (most recent call last):
  File "train.py", line 133, in <module>
    chainer.serializers.load_npz(args.resume, trainer)
  File "/home/u/.conda/envs/TARS/lib/python3.6/site-packages/chainer/serializers/npz.py", line 190, in load_npz
    d.load(obj)
  File "/home/u/.conda/envs/TARS/lib/python3.6/site-packages/chainer/training/trainer.py", line 341, in serialize
    self.updater.serialize(serializer['updater'])
  File "/home/u/.conda/envs/TARS/lib/python3.6/site-packages/chainer/iterators/multiprocess_iterator.py", line 216, in serialize
    serializer('order', self._order)
  File "/home/u/.conda/envs/TARS/lib/python3.6/site-packages/chainer/serializers/npz.py", line 150, in __call__
    numpy.copyto(value, dataset)
ValueError: could not broadcast input array from shape (12600) into shape (2870)
"""


def test_an_ipython8_frame_says_where_an_exception_was_raised() -> None:
    assert _diagnose(_MERLIN_IPYTHON8, "notebook.log") == "framework_error"
    assert _diagnose(_CELL_ONLY, "notebook.log") == "script_error"


def test_a_snapshot_that_does_not_fit_chainers_serializer_is_the_checkpoints() -> None:
    assert _diagnose(_CHAINER_RESUME) == "checkpoint_load_error"
