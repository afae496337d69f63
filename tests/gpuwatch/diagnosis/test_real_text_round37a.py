"""Classes of misses from issue 19's thirty-seventh round (corpus cases 2222-2226, video diffusion and world
models: Cosmos, diffusion-pipe, Text-To-Video-Finetuning; 2246-2255, code LLM fine-tuning: DeepSeek-Coder,
CodeT5, CodeTF, FineTuner, CodeXGLUE) and one of round 36 (sleepkit): a model given another model's config, and
an IPython traceback cut before its final line, whose header named the exception. Error messages are verbatim
from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# NougatCA/FineTuner#16 (case 2253).
_WRONG_CONFIG = """
Traceback (most recent call last):
  File "/data/FineTuner/src/models.py", line 320, in build_model_tokenizer
    model = EncoderDecoderModel(config, encoder=model)
  File "/usr/local/lib/python3.9/dist-packages/transformers/models/encoder_decoder/modeling_encoder_decoder.py", line 195, in __init__
    raise ValueError(f"Config: {config} has to be of type {self.config_class}")
ValueError: Config: RobertaConfig {...} has to be of type <class 'transformers.models.encoder_decoder.configuration_encoder_decoder.EncoderDecoderConfig'>
"""

# AmbiqAI/sleepkit#7 (case 2184): IPython's traceback, cut before its final line.
_IPYTHON_CUT = """
---------------------------------------------------------------------------
IndexError                                Traceback (most recent call last)
Cell In[12], line 1
----> 1 task.train(params)

File /mnt/nvme/sleepkit-main/sleepkit/tasks/stage/train.py:59, in train(params)
     57 )
---> 59 feat_shape = dataloader.feature_shape
"""


def test_a_model_given_another_model_s_config_is_the_caller_s() -> None:
    assert reason_and_rule(_WRONG_CONFIG) == ("script_error", "call-signature")


def test_an_ipython_traceback_cut_before_its_exception_takes_the_header_s_type() -> None:
    assert reason_and_rule(_IPYTHON_CUT) == ("script_error", "exception-IndexError")
    # raised in an installed framework's frame, the same cut traceback is the framework's
    framework = _IPYTHON_CUT.replace(
        "/mnt/nvme/sleepkit-main/sleepkit/tasks/stage/train.py",
        "/usr/lib/python3/site-packages/transformers/trainer.py",
    )
    assert reason_of(framework) == "framework_error"
    # with its final line, the final line decides as before
    assert reason_of(_IPYTHON_CUT + "\nIndexError: list index out of range\n") == "script_error"
