"""Classes of misses from issue 19's thirty-first round (corpus cases 1982-1996, biomedical NLP and medical LLMs:
BioBERT, BioGPT, MedicalGPT, Huatuo, BioMedLM, scispaCy, Med-BERT; 2002-2021, face recognition and gait:
insightface, Pytorch_Retinaface, face.evoLVe, yolov5-face, GaitSet, OpenGait, dlib): TensorFlow's checkpoint reader
given a prefix no file matches, and its example parser on a record without the feature asked for. Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule

# dmis-lab/biobert#119 (case 1982).
_TENSORSLICE = """
$ python run_re.py --task_name=gad --do_train=true --init_checkpoint=./biobert-v1.1-large//model.ckpt-1000000 --max_seq_length=128
tensorflow.python.framework.errors_impl.NotFoundError: Unsuccessful TensorSliceReader constructor: Failed to find any matching files for ./biobert-v1.1-large//model.ckpt-1000000
"""

# ZhiGroup/Med-BERT#12 (case 1992).
_CANT_PARSE_EXAMPLE = """
INFO:tensorflow:Running train on CPU
ERROR:tensorflow:Error recorded from training_loop: {{function_node __inference_tf_data_experimental_map_and_batch_<lambda>_91357}} Key: segment_ids. can't parse serialized Example.
"""


def test_a_checkpoint_prefix_no_file_matches_is_file_not_found() -> None:
    assert reason_and_rule(_TENSORSLICE) == ("file_not_found", "file-not-found-in-message")


def test_a_record_without_the_feature_the_input_asks_for_is_a_dataloader_error() -> None:
    assert reason_and_rule(_CANT_PARSE_EXAMPLE) == ("dataloader_error", "input-pipeline-data")
