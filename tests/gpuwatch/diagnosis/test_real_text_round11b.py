"""Classes of misses from issue 19's eleventh round, batch B (corpus cases 1039-1071: classic NLP,
translation and speech-recognition repositories): TensorFlow 1.x's words for a GPU allocation, a cuDNN RNN
and a device synchronisation that failed, torch 1.0's words for tensors on two devices, another framework's
data-loading workers, Cython frames, NVML asked for a GPU the node does not have, fairseq's checkpoint
wrapper and flashlight's dictionary. Error messages are verbatim from the public reports named in each test;
hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_of

# ---------------------------------------------------------------- TensorFlow 1.x: memory in other words

# tensorflow/tensor2tensor#1866 (case 1044): transformer_big with worker_gpu=8 on 11 GB cards; the copy to a
# GPU could not allocate its destination.
_T2T_DST_TENSOR = """
INFO:tensorflow:Done running local_init_op.
tensorflow.python.framework.errors_impl.InternalError: 2 root error(s) found.
  (0) Internal: Dst tensor is not initialized.
\t [[node transformer/parallel_3_5/transformer/transformer/body/encoder/layer_3/ffn/layer_prepostprocess/layer_norm/sub (defined at data/likede/workspace/tensor2tensor-master/tensor2tensor/layers/common_layers.py:707) ]]
\t [[add_1/_22391]]
0 successful operations.
7 derived errors ignored.
"""

# mozilla/DeepSpeech#724 (case 1049): a batch of 10307; the same failure on TensorFlow's "E " lines, then a
# placeholder error of the same session, its consequence.
_DEEPSPEECH_DST_TENSOR = """
I STARTING Optimization
E Dst tensor is not initialized.
E \t [[Node: tower_0/Gather_DequeueMany/_363 = _Recv[client_terminated=false, recv_device="/job:localhost/replica:0/task:0/gpu:0", send_device="/job:localhost/replica:0/task:0/cpu:0", send_device_incarnation=1, tensor_name="edge_600_tower_0/Gather_DequeueMany", tensor_type=DT_FLOAT, _device="/job:localhost/replica:0/task:0/gpu:0"]()]]
E You must feed a value for placeholder tensor 'Queue_Selector' with dtype int32
"""

# mozilla/DeepSpeech#2026 (case 1048): only TensorFlow's hint after the OOM survives in the excerpt.
_DEEPSPEECH_OOM_HINT = """
Epoch 0 |   Training | Elapsed Time: 0:00:12 | Steps: 3 | Loss: 287.102905
Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info.
    train_loss = run_set('train', train_init_op)
"""


def test_tensorflow_words_for_gpu_memory() -> None:
    assert reason_of(_T2T_DST_TENSOR) == "gpu_oom"
    assert reason_of(_DEEPSPEECH_DST_TENSOR) == "gpu_oom"
    assert reason_of(_DEEPSPEECH_OOM_HINT) == "gpu_oom"


def test_the_oom_hint_gives_way_to_a_host_allocation() -> None:
    # The hint follows any ResourceExhaustedError; one that names the CPU is the host's memory.
    text = (
        "ResourceExhaustedError: OOM when allocating tensor with shape[1024,50000] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu\n"
        "Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info."
    )
    assert reason_of(text) == "host_oom"


# ---------------------------------------------------------------- TensorFlow 1.x: CUDA in other words

# mozilla/DeepSpeech#3088 (case 1047): the same step fails every time; cuDNN's RNN refused the call (the
# report's title, cut where it cuts it).
_DEEPSPEECH_RNN = """
Epoch 0 |   Training | Elapsed Time: 0:41:07 | Steps: 11273 | Loss: 74.218311
Internal: Failed to call ThenRnnForward with model config: [rnn_mode, rnn_input_mode, rnn_direction_mode]: 2, 0, 0 , [num_layers, input_size, num_units, dir_count, max_seq_length, batch_size, cell_num
"""

# kpe/bert-for-tf2#83 (case 1059): ALBERT fine-tuning in Keras, eager TensorFlow's failed synchronisation.
_ALBERT_GPU_SYNC = """
 12/657 [..............................] - ETA: 2:41 - loss: 1.0912 - acc: 0.3672
Failed copying input tensor from GPU in order to run Identity: GPU sync failed [Op:Identity]
"""


def test_tensorflow_words_for_cuda_failures() -> None:
    assert reason_of(_DEEPSPEECH_RNN) == "cuda_error"
    assert reason_of(_ALBERT_GPU_SYNC) == "cuda_error"
    assert (
        reason_of(
            "tensorflow.python.framework.errors_impl.InternalError: Failed to call ThenRnnBackward with model config"
        )
        == "cuda_error"
    )


# ---------------------------------------------------------------- torch 1.0: tensors on two devices


# allenai/allennlp#2555 (case 1040): the tutorial's trainer moved to cuda_device=0.
@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: Expected object of backend CPU but got backend CUDA for argument #3 'index'",
        "RuntimeError: Expected object of backend CUDA but got backend CPU for argument #2 'mat2'",
    ],
)
def test_backend_mismatch_is_the_scripts_placement(line: str) -> None:
    assert reason_of(line) == "script_error"


# ---------------------------------------------------------------- another framework's data workers

# dmlc/gluon-nlp#1505 (case 1056): ELECTRA pretraining under horovodrun; rank 2's batch worker pool hands
# on the manager's KeyError for a dataset proxy it no longer holds.
_GLUON_WORKER = '''
[2]<stderr>:multiprocessing.pool.RemoteTraceback:
[2]<stderr>:"""
[2]<stderr>:Traceback (most recent call last):
[2]<stderr>:  File "/usr/lib/python3.6/multiprocessing/pool.py", line 119, in worker
[2]<stderr>:    result = (True, func(*args, **kwds))
[2]<stderr>:  File "/home/ubuntu/gluon-nlp/src/gluonnlp/data/loading.py", line 147, in _batch_worker_fn
[2]<stderr>:    if len(dataset[0]) > 1:
[2]<stderr>:  File "<string>", line 2, in __getitem__
[2]<stderr>:  File "/usr/lib/python3.6/multiprocessing/managers.py", line 772, in _callmethod
[2]<stderr>:    raise convert_to_error(kind, result)
[2]<stderr>:multiprocessing.managers.RemoteError:
[2]<stderr>:---------------------------------------------------------------------------
[2]<stderr>:Traceback (most recent call last):
[2]<stderr>:  File "/usr/lib/python3.6/multiprocessing/managers.py", line 235, in serve_client
[2]<stderr>:    self.id_to_local_proxy_obj[ident]
[2]<stderr>:KeyError: '7f9f048a0608'
'''


def test_a_gluon_batch_worker_is_the_data_pipeline() -> None:
    assert reason_of(_GLUON_WORKER) == "dataloader_error"


def test_a_worker_function_of_the_script_itself_is_not_a_loader() -> None:
    # A function of the script named like a worker, outside any data/ package, stays the script's.
    text = "Traceback (most recent call last):\n  File \"/home/me/train.py\", line 40, in _worker_fn\n    x = table[key]\nKeyError: 'tok'"
    assert reason_of(text) == "script_error"


def test_a_missing_path_in_a_worker_stays_the_paths() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/opt/mxnet/python/mxnet/gluon/data/dataloader.py", line 421, in _worker_fn\n'
        "    batch = batchify_fn([_worker_dataset[i] for i in samples])\n"
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/wiki/shard_017.npz'"
    )
    assert reason_of(text) == "file_not_found"


# ---------------------------------------------------------------- Cython frames are library code

# explosion/spaCy#3112 (case 1061): adding NER labels on the GPU; cupy raises under spaCy's parser, both
# compiled from .pyx sources named relative to their packages.
_SPACY_CUPY = """
Loaded model 'pt'
Traceback (most recent call last):
  File "./train_ner2.py", line 51, in main
    ner.add_label(label)
  File "nn_parser.pyx", line 167, in spacy.syntax.nn_parser.Parser.add_label
  File "_parser_model.pyx", line 219, in spacy.syntax._parser_model.ParserModel.resize_output
  File "cupy/core/core.pyx", line 1689, in cupy.core.core.ndarray.__setitem__
  File "cupy/core/core.pyx", line 527, in cupy.core.core.ndarray.fill
ValueError: non-scalar numpy.ndarray cannot be used for fill
"""


def test_cython_frames_are_a_librarys() -> None:
    assert reason_of(_SPACY_CUPY) == "framework_error"
    # the same ValueError raised in the script's own frame is still the script's
    own = 'Traceback (most recent call last):\n  File "./train_ner2.py", line 51, in main\n    fill(x)\nValueError: non-scalar numpy.ndarray cannot be used for fill'
    assert reason_of(own) == "script_error"


# ---------------------------------------------------------------- NVML asked for a GPU the node lacks

# NVIDIA/DeepLearningExamples#1166 (case 1057): ELECTRA pretraining under mpirun binds each local rank to
# the GPU of that index.
_ELECTRA_AFFINITY = """
[1,4]<stderr>:Traceback (most recent call last):
[1,4]<stderr>:  File "/workspace/electra/run_pretraining.py", line 293, in main
[1,4]<stderr>:    set_affinity(hvd.local_rank())
[1,4]<stderr>:  File "/workspace/electra/gpu_affinity.py", line 37, in __init__
[1,4]<stderr>:    self.handle = pynvml.nvmlDeviceGetHandleByIndex(device_idx)
[1,4]<stderr>:  File "/usr/local/lib/python3.8/dist-packages/pynvml.py", line 807, in nvmlDeviceGetHandleByIndex
[1,4]<stderr>:    _nvmlCheckReturn(ret)
[1,4]<stderr>:  File "/usr/local/lib/python3.8/dist-packages/pynvml.py", line 310, in _nvmlCheckReturn
[1,4]<stderr>:    raise NVMLError(ret)
[1,4]<stderr>:pynvml.NVMLError_InvalidArgument: Invalid Argument
"""


def test_nvml_device_index_beyond_the_node_is_the_launch() -> None:
    assert reason_of(_ELECTRA_AFFINITY) == "argument_error"


def test_nvml_invalid_argument_elsewhere_stays_nvmls() -> None:
    # An invalid argument to another NVML call is not the launch's.
    text = _ELECTRA_AFFINITY.replace("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetPowerUsage")
    assert reason_of(text) == "framework_error"


# ---------------------------------------------------------------- checkpoints and dictionaries


# facebookresearch/SpanBERT#79 (case 1070): continued pretraining from the released model with SpanBERT's
# fairseq fork.
def test_fairseq_checkpoint_wrapper_is_the_checkpoints() -> None:
    text = "| training on 8 GPUs\nException: Cannot load model parameters from checkpoint, please ensure that the architectures match"
    assert reason_of(text) == "checkpoint_load_error"


# flashlight/wav2letter#529 (case 1064): a transcript token the tokens file lacks, under the C++ runtime's
# abort.
_W2L_DICTIONARY = """
Initialized NCCL 2.4.2 successfully!
terminate called after throwing an instance of 'std::invalid_argument'
  what():  Unknown entry in dictionary: '_famous'
*** Aborted at 1581524749 (unix time) try "date -d @1581524749" if you are using GNU date ***
"""


def test_a_token_missing_from_the_dictionary_is_the_datas() -> None:
    assert reason_of(_W2L_DICTIONARY) == "dataloader_error"
