"""Classes of misses left by issue 19's sixteenth round, about whose code a traceback's frame is: a framework
run from its own checkout and quoted without line numbers (mmselfsup, case 1457), and a general-purpose
library (numpy) refusing the arguments the run's own code passed it (SI-Mamba, case 1459). Error messages
are verbatim from the public reports named in each test; hosts, paths and pids may be made up."""

from __future__ import annotations

from gpuwatch.diagnosis.rules import Frameworks
from tests.gpuwatch.diagnosis.real_text import reason_of

# ---------------------------------------------------------------- a framework's relative frame, quoted without its line

# open-mmlab/mmselfsup#285 (case 1457): SimMIM Swin-B pre-training from mmselfsup's checkout.
_MMSELFSUP = """
File "mmselfsup/models/backbones/simmim_swin.py", in forward
    x, hw_shape = self.patch_embed(x)
ValueError: too many values to unpack (expected 2)
"""


def test_a_frameworks_relative_frame_without_a_line_number_is_the_frameworks() -> None:
    assert reason_of(_MMSELFSUP) == "framework_error"


def test_a_relative_frame_is_a_frameworks_only_when_its_first_directory_names_one() -> None:
    frameworks = Frameworks(packages=["mm*", "megatron"], paths=["site-packages"])
    assert frameworks.path("mmselfsup/models/backbones/simmim_swin.py")
    assert frameworks.path("megatron/training.py")
    assert not frameworks.path("models/backbones/simmim_swin.py")  # the project's own package
    assert not frameworks.path("train.py")
    assert not frameworks.path("./tools/train.py")


def test_the_projects_own_relative_frame_without_a_line_number_is_the_scripts() -> None:
    text = _MMSELFSUP.replace("mmselfsup/models/backbones/", "models/backbones/")
    assert reason_of(text) == "script_error"


# ---------------------------------------------------------------- a library refusing its caller's arguments

# AliBahri94/SI-Mamba#2 (case 1459): pre-training that went to the fine-tuning runner.
_SI_MAMBA = """
Traceback (most recent call last):
  File "/home/ubuntu/SI-Mamba/main.py", line 89, in <module>
    main()
  File "/home/ubuntu/SI-Mamba/main.py", line 83, in main
    finetune(args, config, train_writer, val_writer)
  File "/home/ubuntu/SI-Mamba/tools/runner_finetune.py", line 170, in run_net
    fps_idx = fps_idx[:, np.random.choice(point_all, npoints, False)]
  File "numpy/random/mtrand.pyx", line 1001, in numpy.random.mtrand.RandomState.choice
ValueError: Cannot take a larger sample than population when 'replace=False'
"""


def test_numpy_refusing_the_scripts_arguments_is_the_scripts() -> None:
    assert reason_of(_SI_MAMBA) == "script_error"


def test_an_installed_library_refusing_the_scripts_arguments_is_the_scripts() -> None:
    frame = '  File "/opt/conda/lib/python3.10/site-packages/numpy/random/_generator.pyx", line 1001, in choice'
    text = _SI_MAMBA.replace(
        '  File "numpy/random/mtrand.pyx", line 1001, in numpy.random.mtrand.RandomState.choice', frame
    )
    assert reason_of(text) == "script_error"


def test_a_library_called_by_a_frameworks_code_stays_the_frameworks() -> None:
    # explosion/spaCy's parser resizing its output through cupy (case 1061's frames): the caller is spaCy's
    text = """
Traceback (most recent call last):
  File "train.py", line 40, in main
    ner.add_label(label)
  File "nn_parser.pyx", line 167, in spacy.syntax.nn_parser.Parser.add_label
  File "_parser_model.pyx", line 219, in spacy.syntax._parser_model.ParserModel.resize_output
  File "cupy/core/core.pyx", line 527, in cupy.core.core.ndarray.fill
ValueError: non-scalar numpy.ndarray cannot be used for fill
"""
    assert reason_of(text) == "framework_error"


def test_a_frameworks_own_argument_error_called_by_the_script_stays_the_frameworks() -> None:
    text = """
Traceback (most recent call last):
  File "/workspace/train.py", line 12, in <module>
    model = AutoModel.from_pretrained(path)
  File "/usr/local/lib/python3.10/dist-packages/transformers/modeling_utils.py", line 3015, in from_pretrained
    raise ValueError(f"{path} is not a folder containing a config")
ValueError: /ckpt is not a folder containing a config
"""
    assert reason_of(text) == "framework_error"
