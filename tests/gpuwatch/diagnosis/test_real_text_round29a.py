"""Classes of misses from issue 19's twenty-ninth round (corpus cases 1902-1911, 3D reconstruction and visual
odometry: MASt3R, VGGT, DEVO, LoFTR, MVSNet, monodepth2, SfMLearner; 1922-1941, NLP information extraction: flair,
PaddleNLP, DeepKE, OpenNRE, SpERT, CasRel, DyGIE++, GLiNER, UIE): a framework run from its own repository checkout
(and the NLP toolkits and Paddle suites named as frameworks), a loader's type error as the file's, pybind11
registering a type twice, and a dataset's records without the field its preprocessing maps over. Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""

from __future__ import annotations

from gpuwatch.diagnosis.rules import load_frameworks
from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# zjunlp/DeepKE#119 (case 1928): DeepKE run from its checkout's src/.
_DEEPKE_CHECKOUT = r"""
Traceback (most recent call last):
  File ".\predict.py", line 14, in main
    result = model.predict(text)
  File "e:\data_study\nlp\deepke-main\src\deepke\name_entity_re\standard\models\InferBert.py", line 141, in predict
    tag[wordstype].append(''.join(tmp))
KeyError: 'YAS'
"""

# PaddlePaddle/PaddleRS#106 (case 1890): PaddleRS run from its develop branch.
_PADDLERS_CHECKOUT = r"""
Traceback (most recent call last):
  File "D:\CVcode\Side\PaddleRS-develop\paddlers\tasks\change_detector.py", line 467, in evaluate
    outputs = self.run(self.net, data, 'eval')
  File "D:\CVcode\Side\PaddleRS-develop\paddlers\tasks\change_detector.py", line 151, in run
    pred = self.postprocess(pred, batch_restore_list)[0]  # NCHW
IndexError: list index out of range
"""


def test_a_framework_run_from_its_own_checkout_is_the_framework() -> None:
    assert reason_of(_DEEPKE_CHECKOUT) == "framework_error"
    assert reason_of(_PADDLERS_CHECKOUT) == "framework_error"


def test_a_project_s_own_package_or_a_vendored_copy_under_another_name_stays_the_run_s() -> None:
    frameworks = load_frameworks()
    assert frameworks.path("/root/flair/flair/tagging_model.py")
    assert not frameworks.path("/home/u/diffusion_policy/diffusion_policy/common/sampler.py")  # not a framework's name
    assert not frameworks.path("/data/bevfusion/mmdet3d/models/detectors/base.py")  # vendored: case 816's label
    mine = _DEEPKE_CHECKOUT.replace(r"deepke-main\src\deepke", r"my-ner-main\src\my_ner")
    assert reason_of(mine) == "script_error"


# flairNLP/flair#31 (case 1924): a model file pickled by an older flair.
_FLAIR_LOAD = """
Traceback (most recent call last):
  File "predict.py", line 4, in <module>
    tagger: SequenceTagger = SequenceTagger.load_from_file('resources/taggers/example-ner/final-model.pt')
  File "/flair/flair/tagging_model.py", line 129, in load_from_file
    hidden_size=state['hidden_size'],
TypeError: 'SequenceTagger' object is not subscriptable
"""


def test_a_type_error_inside_a_framework_s_loader_is_the_file_s() -> None:
    assert reason_of(_FLAIR_LOAD) == "checkpoint_load_error"


# lavis-nlp/spert#57 (case 1935).
_PYBIND_TWICE = """
$ python ./spert.py train --config configs/example_train.conf
----------------------------------------------------------------------
terminate called after throwing an instance of 'std::runtime_error'
what():  generic_type: cannot initialize type "WorkerId": an object with that name is already defined
"""


def test_pybind11_registering_a_type_twice_is_an_import_error() -> None:
    assert reason_and_rule(_PYBIND_TWICE) == ("import_error", "pybind-type-registered-twice")


# universal-ie/UIE#48 (case 1940).
_SCHEMA_FIELD = """
  File "/home/miniconda3/envs/uie/lib/python3.8/site-packages/datasets/arrow_dataset.py", line 1736, in map
    transformed_shards = [r.get() for r in results]
  File "/home/miniconda3/envs/uie/lib/python3.8/site-packages/multiprocess/pool.py", line 771, in get
    raise self._value
KeyError: 'Field "spots" does not exist in table schema'
"""


def test_a_dataset_without_the_field_its_preprocessing_maps_is_a_dataloader_error() -> None:
    assert reason_and_rule(_SCHEMA_FIELD) == ("dataloader_error", "input-pipeline-data")
