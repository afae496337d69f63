"""Classes of misses from issue 19's rounds fifty-eight to sixty (corpus cases 2899-2916: image-to-3D and
table/text-to-SQL training; 2929-2950: retrieval-augmented training and knowledge-graph embedding; 2959-2980:
point-cloud and mesh training and neural audio codecs), with older misses (1570, 1907, 2008, 2765). Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of


def test_a_cython_frame_is_placed_in_its_package_by_its_qualified_name() -> None:
    # facebookresearch/DPR#25 (case 2931): numpy's mtrand.pyx refusing the reader's call
    text = 'Traceback (most recent call last):\n  File "/home/u/DPR-Aug/dpr/models/reader.py", line 175, in _get_positive_idx\n    positive_idx = np.random.choice(len(positives)) if is_random else 0\n  File "mtrand.pyx", line 894, in numpy.random.mtrand.RandomState.choice\nValueError: a must be greater than 0 unless no samples are taken\n'
    assert reason_of(text) == "script_error"


def test_a_subprocess_killed_by_sigkill_in_pbg_s_words_is_host_memory() -> None:
    # facebookresearch/PyTorch-BigGraph#128 (case 2945)
    assert reason_of("RuntimeError: A subprocess exited unexpectedly with status -9\n") == "host_oom"


def test_a_config_checker_s_unknown_key_is_the_configuration() -> None:
    # facebookresearch/PyTorch-BigGraph#216 (case 2946)
    text = "Error in the configuration file, aborting.\nCRITICAL: Unknown key: regularization_coef\n"
    assert reason_and_rule(text) == ("argument_error", "unknown-named-choice")


def test_a_checkout_s_package_under_its_python_directory() -> None:
    # awslabs/dgl-ke#242 (case 2950)
    text = 'Traceback (most recent call last):\n  File "/home/u/dgl-ke-master/python/dglke/models/pytorch/loss.py", line 80, in get_total_loss\n    neg_loss = self._get_neg_loss(neg_score) * edge_weight\nRuntimeError: The size of tensor a (128) must match the size of tensor b (2048) at non-singleton dimension 1\n'
    assert reason_of(text) == "framework_error"


@pytest.mark.parametrize(
    "text",
    [
        # JIA-Lab-research/Stratified-Transformer#95 (case 2969), tsunghan-wu/RandLA-Net-pytorch#26 (case 2963)
        "RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 67568 but got size 3 for tensor number 1 in the list.\n",
        "RuntimeError: weight tensor should be defined either for all 19 classes or no classes but got weight tensor of shape: [1, 19]\n",
        # QingyongHu/RandLA-Net#286 (case 2961): TensorFlow's words
        "Node: 'loss/mul'\n2 root error(s) found.\n  (0) INVALID_ARGUMENT: required broadcastable shapes\n",
    ],
)
def test_more_shapes_judged_by_their_caller(text: str) -> None:
    assert reason_and_rule(text) == ("script_error", "layer-input-shape")


def test_tensorflow_s_own_frames_are_passed_over_to_find_the_caller() -> None:
    # YoYo000/MVSNet (case 1907, an older miss)
    text = 'Traceback (most recent call last):\n  File "train.py", line 275, in train\n    images = tf.image.per_image_standardization(images)\n  File "/home/pc/envs/MVSnet/lib/python2.7/site-packages/tensorflow/python/ops/image_ops_impl.py", line 135, in _Check3DImage\n    raise ValueError("\'image\' (shape %s) must be three-dimensional." % image.shape)\nValueError: \'image\' (shape (?, ?, ?, 3)) must be three-dimensional.\n'
    assert reason_of(text) == "script_error"


def test_one_hot_given_labels_past_its_classes_is_the_script_s() -> None:
    # dauparas/ProteinMPNN (case 1570, an older miss)
    assert reason_and_rule("RuntimeError: Class values must be smaller than num_classes.\n") == (
        "script_error",
        "index-shape",
    )


def test_cudnn_s_kernel_launch_in_tensorflow_s_words() -> None:
    # lightaime/deep_gcns#2 (case 2966)
    text = "InternalError (see above for traceback): cudnn PoolBackward launch failed\n"
    assert reason_and_rule(text) == ("cuda_error", "cuda-library-old-wording")


def test_a_path_said_not_to_exist_in_other_words() -> None:
    # namtuanly/MTL-TabNet#6 (case 2910)
    text = "AssertionError: OCRFinTabDataset: TableHardDiskLoader: /datasets/mmocr_fintabnet_recognition_0726_train/StructureLabelAddEmptyBbox_train/ is not exist\n"
    assert reason_and_rule(text) == ("file_not_found", "path-is-not-exist")


def test_datasets_refusing_its_own_cache_is_the_framework_s() -> None:
    # eosphoros-ai/DB-GPT-Hub#174 (case 2906)
    text = "NotImplementedError: Loading a dataset cached in a LocalFileSystem is not supported.\n"
    assert reason_and_rule(text) == ("framework_error", "datasets-cache-filesystem")


def test_audiocraft_s_check_that_its_configured_models_fit() -> None:
    # facebookresearch/audiocraft#235 (case 2979)
    text = "AssertionError: (\"Cardinalities of the LM and compression model don't match: \", 'LM cardinality is 2048 vs ', 'compression model cardinality is 1024')\n"
    assert reason_and_rule(text) == ("argument_error", "runner-config-parts")


def test_an_empty_collection_in_a_data_module_is_the_data_s() -> None:
    # deepcam-cn/yolov5-face (case 2008, an older miss)
    face = 'Traceback (most recent call last):\n  File "C:\\\\YOLOv5\\\\yolov5-face\\\\utils\\\\face_datasets.py", line 166, in __init__\n    labels, shapes = zip(*cache.values())\nValueError: not enough values to unpack (expected 2, got 0)\n'
    assert reason_and_rule(face) == ("dataloader_error", "empty-data")
    # knazeri/edge-connect#65 (case 2765, an older miss): raised in the stdlib, called by the dataset
    edge = 'Traceback (most recent call last):\n  File "/home/u/edge-connect-master/src/dataset.py", line 139, in load_mask\n    mask_index = random.randint(0, len(self.mask_data) - 1)\n  File "/usr/lib/python3.6/random.py", line 221, in randint\n    return self.randrange(a, b+1)\n  File "/usr/lib/python3.6/random.py", line 199, in randrange\n    raise ValueError("empty range for randrange() (%d,%d, %d)" % (istart, istop, width))\nValueError: empty range for randrange() (0,0, 0)\n'
    assert reason_and_rule(edge) == ("dataloader_error", "empty-data")
    # the same words in the run's other code stay the script's
    assert reason_of(face.replace("utils\\\\face_datasets.py", "train.py")) == "script_error"
