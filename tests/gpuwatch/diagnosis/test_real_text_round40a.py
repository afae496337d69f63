"""Classes of misses from issue 19's rounds forty to forty-two (corpus cases 2359-2382: diffusion language models
and recommender training; 2389-2415: graph learning at scale and molecule generation; 2419-2443: audio
representation learning and detection transformers): operands of incompatible dtypes; Paddle's crash handler in
its unquoted words; recommender, graph and molecular frameworks; a module's body asking another module for a name
it lacks while being imported; CUDA in a forked DataLoader worker; a tool's registry refusing a named choice; a
collective without a process group; a checkpoint's missing entry quoted under its line; h5py's missing object; a
storage fault a worker printed before the loader reported it. Error messages are verbatim from the public reports
named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# DreamLM/Dream#27 (case 2362) and a torch 1.x wording of the same mistake.
_DTYPE = [
    "RuntimeError: Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: long int and query.dtype: c10::Half instead.\n",
    "RuntimeError: expected scalar type Float but found Half\n",
]


@pytest.mark.parametrize("text", _DTYPE)
def test_operands_of_dtypes_an_operation_cannot_combine_are_the_script_s(text: str) -> None:
    assert reason_and_rule(text) == ("script_error", "dtype-mismatch")


# PaddlePaddle/PaddleRec#979 (case 2374).
_PADDLE_ABORT = """
2024-02-05 10:25:05,276 - INFO - epoch: 0, batch_id: 0, auc:0.000000, loss:0.8438953, avg_reader_cost: 0.00402 sec
C++ Traceback (most recent call last):
0 embedding_ad_func(paddle::Tensor const&, paddle::Tensor const&, long, bool)
1 paddle::experimental::embedding(paddle::Tensor const&, paddle::Tensor const&, long, bool)
2 void phi::EmbeddingKernel<float, phi::CPUContext>(phi::CPUContext const&, phi::DenseTensor const&, phi::DenseTensor const&, long, phi::DenseTensor*)
3 GOMP_parallel

Error Message Summary:
FatalError: Process abort signal is detected by the operating system.
[TimeInfo: *** Aborted at 1707128705 (unix time) try "date -d @1707128705" if you are using GNU date ***]
[SignalInfo: *** SIGABRT (@0x8df) received by PID 2271 (TID 0x7f89f4145080) from PID 2271 ***]
"""


def test_paddle_s_crash_handler_without_quotes_is_a_native_crash() -> None:
    assert reason_and_rule(_PADDLE_ABORT) == ("framework_error", "native-crash-reported")
    # its SIGTERM from outside is still not a crash
    assert reason_of("FatalError: Termination signal is detected by the operating system.\n") != "framework_error"


# RUCAIBox/RecBole-GNN#80 (case 2380): RecBole's trainer in a clone kept under another name.
_RECBOLE = """
Traceback (most recent call last):
  File "/home/izuna/zyx/RecBole-GNN-main/run_recbole_gnn.py", line 19, in <module>
    run_recbole_gnn(model=args.model, dataset=args.dataset, config_file_list=config_file_list)
  File "/home/izuna/zyx/rec/recbole/trainer/trainer.py", line 618, in evaluate
    interaction, scores, positive_u, positive_i = eval_func(batched_data)
  File "/home/izuna/zyx/rec/recbole/trainer/trainer.py", line 556, in _neg_sample_batch_eval
    batch_user_num = positive_u[-1] + 1
TypeError: 'NoneType' object is not subscriptable
"""

# snap-stanford/ogb through NodeFormer (case 2395), spektral (case 2396).
_LIBRARY_BUGS = [
    """
Traceback (most recent call last):
  File "main-batch.py", line 43, in <module>
    dataset = load_dataset(args.data_dir, args.dataset, args.sub_dataset)
  File "/root/anaconda3/envs/nodeformer/lib/python3.8/site-packages/ogb/nodeproppred/dataset.py", line 111, in pre_process
    additional_node_files = self.meta_info['additional node files'].split(',')
AttributeError: 'float' object has no attribute 'split'
""",
    """
Traceback (most recent call last):
  File "ogbn-proteins_gcn.py", line 37, in <module>
    X, A, _ = ogb.graph_to_numpy(graph)
  File "/home/ubuntu/GNN/env/lib/python3.7/site-packages/spektral/datasets/ogb.py", line 22, in graph_to_numpy
    E = graph['edge_feat'].astype(dtype)
AttributeError: 'NoneType' object has no attribute 'astype'
""",
    _RECBOLE,
]


@pytest.mark.parametrize("text", _LIBRARY_BUGS)
def test_a_domain_framework_s_own_bug_is_the_framework_s(text: str) -> None:
    assert reason_of(text) == "framework_error"


# Pocket2Mol#43 (case 2402) and RT-DETR#52 (case 2431).
_IMPORT_TIME = [
    """
Traceback (most recent call last):
  File "train.py", line 9, in <module>
    import torch.utils.tensorboard
  File "/home/debanjan/miniconda3/envs/Pocket2Mol/lib/python3.8/site-packages/torch/utils/tensorboard/__init__.py", line 4, in <module>
    LooseVersion = distutils.version.LooseVersion
AttributeError: module 'distutils' has no attribute 'version'
""",
    """
Traceback (most recent call last):
  File "C:\\Users\\copyc\\RT-DETR\\rtdetr_pytorch\\tools\\train.py", line 9, in <module>
    import src.misc.dist as dist
  File "C:\\Users\\copyc\\RT-DETR\\rtdetr_pytorch\\tools\\..\\src\\data\\transforms.py", line 30, in <module>
    ConvertDtype = register(T.ConvertDtype)
                            ^^^^^^^^^^^^^^
AttributeError: module 'torchvision.transforms.v2' has no attribute 'ConvertDtype'. Did you mean: 'ConvertImageDtype'?
""",
]


@pytest.mark.parametrize("text", _IMPORT_TIME)
def test_a_module_lacking_a_name_while_another_is_imported_is_the_environment(text: str) -> None:
    assert reason_and_rule(text) == ("import_error", "import-time-missing-name")


def test_the_entry_script_s_own_body_asking_a_module_stays_the_script_s() -> None:
    # thunlp/OpenNRE (case 1930): the script's first frame is the one that asks; and a call under runpy
    direct = """
Traceback (most recent call last):
  File "train_nyt10_pcnn_att.py", line 21, in <module>
    opennre.download_nyt10(root_path=root_path)
AttributeError: module 'opennre' has no attribute 'download_nyt10'
"""
    assert reason_of(direct) == "script_error"
    under_runpy = """
Traceback (most recent call last):
  File "/usr/lib/python3.10/runpy.py", line 86, in _run_code
    exec(code, run_globals)
  File "/work/train.py", line 5, in <module>
    opennre.download_nyt10(root_path=root_path)
AttributeError: module 'opennre' has no attribute 'download_nyt10'
"""
    assert reason_of(under_runpy) == "script_error"


# pyg-team/pytorch_geometric#5340 (case 2398).
_WORKER_CUDA = """
RuntimeError: Caught RuntimeError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "/usr/local/lib/python3.7/dist-packages/torch/utils/data/_utils/worker.py", line 302, in _worker_loop
    data = fetcher.fetch(index)
  File "/usr/local/lib/python3.7/dist-packages/torch/utils/data/_utils/fetch.py", line 49, in fetch
    data = [self.dataset[idx] for idx in possibly_batched_index]
RuntimeError: CUDA error: initialization error
CUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
"""


def test_cuda_in_a_forked_dataloader_worker_is_the_data_pipeline_s() -> None:
    assert reason_and_rule(_WORKER_CUDA) == ("dataloader_error", "loader-worker-cuda-init")
    # outside a worker the same error stays CUDA's (cases 758, 1041)
    assert reason_of("RuntimeError: CUDA error: initialization error\n") == "cuda_error"


# torchmd/torchmd-net#362 (case 2414).
_UNKNOWN_CHOICE = """
Traceback (most recent call last):
  File "/home/u/mambaforge/envs/torchmd-net/lib/python3.10/site-packages/torchmdnet/models/model.py", line 110, in create_model
    raise ValueError(f'Unknown architecture: {args["model"]}')
ValueError: Unknown architecture: torchmd_gn
"""


def test_a_registry_refusing_a_configured_name_is_the_configuration() -> None:
    assert reason_and_rule(_UNKNOWN_CHOICE) == ("argument_error", "unknown-named-choice")
    assert reason_and_rule("KeyError: 'Unknown optimizer: adamw8'\n") == ("argument_error", "unknown-named-choice")
    # an unknown thing that is no configured choice is not
    assert reason_of("ValueError: Unknown format code 'd' for object of type 'float'\n") != "argument_error"


# facebookresearch/AudioMAE#24 (case 2428). Round 87's session changed the reading: three later cases (3023, 3579,
# 3748) were a framework's trainer calling a collective its own set-up never initialised, and the message cannot tell
# them from this launch without a launcher; the rule now says framework_error and case 2428 is its known miss.
def test_a_collective_without_a_process_group_is_read_as_the_frameworks() -> None:
    text = (
        "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.\n"
    )
    assert reason_and_rule(text) == ("framework_error", "process-group-not-initialized")


# Sense-X/Co-DETR#64 (case 2438).
def test_a_checkpoint_s_missing_entry_quoted_under_its_line_is_the_checkpoint_s() -> None:
    text = "self._epoch = checkpoint['meta']['epoch']\nKeyError: 'meta'\n"
    assert reason_and_rule(text) == ("checkpoint_load_error", "checkpoint-entry-missing")
    # any other dict's missing key under its line stays the script's
    assert reason_of("label = batch['labels']\nKeyError: 'labels'\n") == "script_error"
    # and so does a checkpoint's entry read in the script's own frame (s3prl's run_downstream.py, case 2424)
    framed = """
Traceback (most recent call last):
  File "run_downstream.py", line 132, in get_downstream_args
    args = update_args(args, ckpt['Args'], preserve_list=cannot_overwrite_args)
KeyError: 'Args'
"""
    assert reason_of(framed) == "script_error"


# RetroCirce/HTS-Audio-Transformer#36 (case 2430).
def test_an_hdf5_file_without_the_object_read_is_the_data_s_or_the_checkpoint_s() -> None:
    text = "KeyError: \"Unable to open object (object 'hdf5_path' doesn't exist)\"\n"
    assert reason_and_rule(text) == ("dataloader_error", "h5-object-missing")
    in_loading = """
Traceback (most recent call last):
  File "train.py", line 40, in <module>
    model.load_weights("weights.h5")
  File "/usr/lib/python3/site-packages/keras/engine/training.py", line 2234, in load_weights
    f = h5py.File(filepath, "r")["model_weights"]
  File "/usr/lib/python3/site-packages/h5py/_hl/group.py", line 357, in __getitem__
    oid = h5o.open(self.id, self._e(name), lapl=self._lapl)
KeyError: "Unable to synchronously open object (object 'model_weights' doesn't exist)"
"""
    assert reason_and_rule(in_loading) == ("checkpoint_load_error", "h5-object-missing-checkpoint")


# YuanGongND/ast#41 (case 2420).
_WORKER_STORAGE = """
formats: can't open input file `/project/ast/data/ESC-50-master/audio/1-31836-A-4.wav': Input/output error
Epoch: [1][100/134]     Per Sample Total Time 0.07304   Per Sample Data Time 0.00930    Per Sample DNN Time 0.06374     Train Loss 2.7119
Traceback (most recent call last):
  File "../../src/run.py", line 99, in <module>
    train(audio_model, train_loader, val_loader, args)
  File "/project/src/traintest.py", line 100, in train
    for i, (audio_input, labels) in enumerate(train_loader):
  File "/opt/conda/lib/python3.7/site-packages/torch/utils/data/dataloader.py", line 1229, in _process_data
    data.reraise()
  File "/opt/conda/lib/python3.7/site-packages/torch/_utils.py", line 434, in reraise
    raise exception
RuntimeError: Caught RuntimeError in DataLoader worker process 28.
Original Traceback (most recent call last):
  File "/opt/conda/lib/python3.7/site-packages/torch/utils/data/_utils/worker.py", line
"""


def test_a_storage_fault_a_worker_printed_before_the_loader_reported_it_is_the_cause() -> None:
    assert reason_and_rule(_WORKER_STORAGE) == ("storage_error", "storage")
    # a storage fault the run went on from, then another failure that is no worker's, is still survived
    survived = (
        _WORKER_STORAGE.split("Traceback")[0]
        + 'Traceback (most recent call last):\n  File "/project/src/traintest.py", line 120, in train\n    acc = correct / total\nZeroDivisionError: division by zero\n'
    )
    assert reason_of(survived) == "script_error"
