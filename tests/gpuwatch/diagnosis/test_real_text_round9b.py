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

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_of

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
    assert reason_of(_MERLIN_IPYTHON8, "notebook.log") == "framework_error"
    assert reason_of(_CELL_ONLY, "notebook.log") == "script_error"


def test_a_snapshot_that_does_not_fit_chainers_serializer_is_the_checkpoints() -> None:
    assert reason_of(_CHAINER_RESUME) == "checkpoint_load_error"


# ---------------------------------------------------------------- native libraries in their own words


# catboost/catboost#1024, #300, #432, #2894 (cases 902, 905, 906, 908); google/meridian#149 (case 888);
# lightgbm-org/LightGBM#4946 (case 916): the library's C++ code stopped, whatever Python class carries it.
@pytest.mark.parametrize(
    "line",
    [
        "_catboost.CatBoostError: catboost/cuda/gpu_data/compressed_index_builder.h:116: Error: can't proceed some features",
        "_catboost.CatboostError: std::bad_cast",
        "CatBoostError: catboost/cuda/cuda_lib/cuda_manager.cpp:199: Condition violated: `State == nullptr'",
        "CatBoostError: catboost/cuda/gpu_data/compressed_index_builder.h:142: Error: can't proceed some features",
        "tensorflow.python.framework.errors_impl.InternalError: RET_CHECK failure (external/local_xla/xla/service/gpu/gemm_rewriter_triton.cc:1269) fusion_inputs.size() - operand_count_before <= TritonFusionAnalysis::kMaxParameterPerScope  [Op:__inference__xla_windowed_adaptive_nuts_93438]",
        "[LightGBM] [Fatal] Check failed: (best_split_info.left_count) > (0) at LightGBM/src/treelearner/serial_tree_learner.app, line 686",
    ],
)
def test_a_native_librarys_own_error_is_the_frameworks(line: str) -> None:
    text = f"""
Traceback (most recent call last):
  File "fit_gpu.py", line 47, in <module>
    model.fit(X_train, y_train)
  File "_catboost.pyx", line 862, in _catboost._CatBoost._train
{line}
"""
    assert reason_of(text) == "framework_error"
    assert reason_of(line) == "framework_error"  # a report's last line alone


def test_a_native_location_leaves_a_known_cause_to_its_rule() -> None:
    # a CUDA error, an allocation failure or a cuSPARSE status behind a source location keeps its reason
    assert (
        reason_of("RuntimeError: /opt/src/kernels/gather.cu:88: CUDA error: an illegal memory access was encountered")
        == "cuda_error"
    )
    assert reason_of("RuntimeError: /opt/src/alloc.cpp:41: CUDA out of memory. Tried to allocate 2.00 GiB") == "gpu_oom"
    # dmlc/dgl#1125 (case 895): a failed check on cuSPARSE's status is the CUDA library's error
    assert (
        reason_of(
            "dgl._ffi.base.DGLError: [15:28:59] /home/byli/dgl/src/kernel/cuda/binary_reduce_sum.cu:107: Check failed: e == CUSPARSE_STATUS_SUCCESS: CUSPARSE ERROR"
        )
        == "cuda_error"
    )


# PaddlePaddle/ERNIE#94 (case 920): glog's failure-signal handler for a SIGFPE in Paddle v2's GPU code.
_PADDLE_SIGFPE = """
I0413 02:31:41.502923  6739 TrainerInternal.cpp:165]  Batch=48599 samples=3110336 AvgCost=0.726715 CurrentCost=6.82351 Eval: error=0.0763677  CurrentEval: error=0.46875
*** Aborted at 1555093901 (unix time) try "date -d @1555093901" if you are using GNU date ***
PC: @                0x0 (unknown)
*** SIGFPE (@0x8d4166) received by PID 6739 (TID 0x7f7805a54700) from PID 9257318; stack trace: ***
    @     0x7f7842117a30 (unknown)
    @           0x8d4166 paddle::GpuVectorT<>::getAbsMax()
    @           0x9db033 paddle::Parameter::incUpdate()
"""


def test_glogs_handler_for_other_signals_is_a_reported_crash() -> None:
    assert reason_of(_PADDLE_SIGFPE) == "framework_error"


# ---------------------------------------------------------------- no GPU to use

# catboost/catboost#230 (case 904), Azure/fast_retraining#69 (case 913), googlecolab/colabtools#946
# (case 912, Colab's runtime log, newest line first).
_COLAB_NO_DEVICE = """
Timestamp	Level	Message
Jan 12, 2020, 3:46:13 PM	WARNING	WARNING:root:kernel 351e3411-a04c-4198-96df-0cf7e3106605 restarted
Jan 12, 2020, 3:46:13 PM	INFO	KernelRestarter: restarting kernel (1/5), keep random ports
Jan 12, 2020, 3:46:13 PM	WARNING	2020-01-12 14:46:13.355670: F tensorflow/stream_executor/lib/statusor.cc:34] Attempting to fetch value instead of handling error Not found: no CUDA devices found
Jan 12, 2020, 3:46:01 PM	WARNING	2020-01-12 14:46:01.537574: I tensorflow/stream_executor/cuda/cuda_diagnostics.cc:156] kernel driver does not appear to be running on this host (cfafab0770c5): /proc/driver/nvidia/version does not exist
Jan 12, 2020, 3:46:01 PM	WARNING	2020-01-12 14:46:01.536588: E tensorflow/stream_executor/cuda/cuda_driver.cc:318] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected
"""


@pytest.mark.parametrize(
    "text",
    [
        "_catboost.CatboostError: catboost/libs/train_lib/train_model.cpp:738: GPU Device not found.",
        "LightGBMError: b'GPU Tree Learner was not enabled in this build. Recompile with CMake option -DUSE_GPU=1'",
        "RuntimeError: CUDA error: no CUDA-capable device is detected",
        _COLAB_NO_DEVICE,
    ],
)
def test_no_gpu_to_use_is_an_installation(text: str) -> None:
    assert reason_of(text) == "import_error"


def test_a_gpu_that_fell_off_the_bus_outranks_no_device() -> None:
    text = """
[ 8823.118271] NVRM: Xid (PCI:0000:3b:00): 79, pid=4122, GPU has fallen off the bus.
RuntimeError: CUDA error: no CUDA-capable device is detected
"""
    assert reason_of(text) == "gpu_hardware"


# ---------------------------------------------------------------- a setting the library refuses


# dmlc/xgboost#2442 (case 899): inside glog's check, the library names the parameter to change;
# unit8co/darts#801 (case 909): Python's Enum refusing a configuration value;
# catboost/catboost#363 (case 907): cross-validation that only runs on the CPU.
@pytest.mark.parametrize(
    "line",
    [
        "[07:25:16] /home/ubuntu/dwnl/xgboost/dmlc-core/include/dmlc/././logging.h:300: [07:25:16] /home/ubuntu/dwnl/xgboost/plugin/updater_gpu/src/gpu_hist_builder.cu:582: Check failed: fmat.SingleColBlock() grow_gpu_hist: must have single column block. Try setting 'tree_method' parameter to 'exact'",
        "ValueError: 'cuda' is not a valid DistributedType",
        "CatboostError: except learn on CPU task type, got GPU",
    ],
)
def test_a_setting_the_library_refuses_is_the_launchs(line: str) -> None:
    assert reason_of(line) == "argument_error"


def test_an_enum_word_inside_a_longer_message_is_not_a_refused_setting() -> None:
    # only Enum's own sentence, the whole message, reads as a refused value
    assert reason_of("ValueError: input 'x' is not a valid Tensor shape for this layer: got (3, 4)") == "script_error"


# ---------------------------------------------------------------- input pipelines, memory and paths

# talmolab/sleap#480 (case 911): a ValueError raised in a Python function inside the tf.data pipeline.
_SLEAP_PYFUNC = """
Epoch 1/200
tensorflow.python.framework.errors_impl.InvalidArgumentError: 2 root error(s) found.
  (0) Invalid argument:  ValueError: need at least one array to stack
Traceback (most recent call last):

  File "d:\\anaconda\\envs\\sleap\\lib\\site-packages\\tensorflow\\python\\ops\\script_ops.py", line 242, in __call__
    return func(device, token, args)

  File "D:\\Anaconda\\envs\\sleap\\lib\\site-packages\\sleap\\nn\\data\\augmentation.py", line 249, in py_augment
    aug_instances = np.stack(aug_instances, axis=0)

  File "D:\\Anaconda\\envs\\sleap\\lib\\site-packages\\numpy\\core\\shape_base.py", line 422, in stack
    raise ValueError('need at least one array to stack')

ValueError: need at least one array to stack


\t [[{{node EagerPyFunc}}]]
\t [[IteratorGetNext]]
\t [[IteratorGetNext/_2]]
0 successful operations.
"""

# NVIDIA-Merlin/HugeCTR#39 (case 885): every reader thread reports the dataset's header, lines interleaved.
_HUGECTR_HEADER = """
[21d09h02m30s][HUGECTR][INFO]: num_internal_buffers 1
[HCDEBUG][ERROR] DataHeaderError /hugectr/HugeCTR/include/data_readers/data_reader_worker.hpp:58
[HCDEBUG][ERROR] DataHeaderError /hugectr/HugeCTR/include/data_readers/data_reader_worker.hpp:58DataHeaderError
/hugectr/HugeCTR/include/data_readers/data_reader_worker.hpp[HCDEBUG][ERROR] DataHeaderError /hugectr/HugeCTR/include/data_readers/data_reader_worker.hpp /hugectr/HugeCTR/include/data_readers/data_reader_worker.hpp:58
"""


def test_input_pipelines_in_their_own_words_are_the_data_loaders() -> None:
    assert reason_of(_SLEAP_PYFUNC) == "dataloader_error"
    assert reason_of(_HUGECTR_HEADER) == "dataloader_error"


def test_the_mps_allocator_refusing_a_buffer_is_the_devices_memory() -> None:
    # Nixtla/neuralforecast#1297 (case 889): Lightning on a Mac's GPU (mps)
    text = """
GPU available: True (mps), used: True
Epoch 0:   0%|          | 0/1 [00:00<?, ?it/s]
RuntimeError: Invalid buffer size: 17.62 GB
"""
    assert reason_of(text) == "gpu_oom"


def test_a_path_a_cxx_program_cannot_open_is_the_paths() -> None:
    # catboost/catboost#161 (case 903): the OS's reason printed in the wrong code page
    line = '(class TFileError) (╤шёЄхьх эх єфрхЄё  эрщЄш єърчрээ√щ яєЄ№.) st/util/system/file.cpp:613: can\'t open "/tmp/cat_feature_index.80757456-e083f953-24561154-2.tmp" with mode CreateAlways|WrOnly|Seq (0x00000034)'
    assert reason_of(line) == "file_not_found"
