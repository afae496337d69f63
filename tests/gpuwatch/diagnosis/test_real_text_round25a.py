"""Classes of misses from issue 19's twenty-fifth round (corpus cases 1761-1781: time-series forecasting training
stacks: Chronos, gluonts' PatchTST, Time-Series-Library's TimesNet and TimeMixer, uni2ts (Moirai), TimesFM, MOMENT,
FEDformer, N-BEATS, sktime, TimeGAN, NVIDIA's TFT, MTGNN, LibCity, STGraph, Kats): the time-series forecasting
frameworks and their probabilistic backends (timesfm, gluonts, pystan, fbprophet, ...) counted as frameworks, so an
attribute bug in their own code is theirs; the Hugging Face Hub's answer that a file is not in a repository
("EntryNotFoundError ... Entry Not Found for url"), a path the run names that does not exist; and the Trainer's
"The model did not return a loss from the inputs", the caller's batches without labels. Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# ---------------------------------------------------------------- forecasting frameworks' own frames

# google-research/timesfm#181 (case 1768): the official forecast example on the JAX backend.
_TIMESFM_MEDIAN_INDEX = r"""
AttributeError                            Traceback (most recent call last)
Cell In[19], line 10
      8 frequency_input = [0, 1, 2]
---> 10 point_forecast, experimental_quantile_forecast = tfm.forecast(
     11     forecast_input,
     12     freq=frequency_input,
     13 )

File /opt/conda/lib/python3.10/site-packages/timesfm/timesfm_base.py:332, in TimesFmBase.forecast(self, inputs, freq, window_size, forecast_context_len, return_forecast_on_context, normalize)
    330   return mean_forecast, quantile_forecast
    331 elif self.hparams.point_forecast_mode == "median":
--> 332   if self._median_index == -1:
    333     for i, quantile in enumerate(self.quantiles):
    334       if quantile == 0.5:

AttributeError: 'TimesFmJax' object has no attribute '_median_index'
"""

# facebookresearch/Kats#258 (case 1781): Kats' Prophet model fitting through fbprophet's stan backend.
_KATS_PYSTAN_FIT_CLASS = r"""
  File "/opt/miniconda3/lib/python3.9/site-packages/kats/models/prophet.py", line 285, in fit
    self.model = prophet.fit(df=df)
  File "/opt/miniconda3/lib/python3.9/site-packages/fbprophet/forecaster.py", line 1166, in fit
    self.params = self.stan_backend.fit(stan_init, dat, **kwargs)
  File "/opt/miniconda3/lib/python3.9/site-packages/fbprophet/models.py", line 245, in fit
    self.stan_fit = self.model.optimizing(**args)
  File "/opt/miniconda3/lib/python3.9/site-packages/pystan/model.py", line 542, in optimizing
    fit = self.fit_class(data, seed)
AttributeError: 'StanModel' object has no attribute 'fit_class'
"""


def test_a_forecasting_framework_s_own_attribute_bug_is_the_framework_s() -> None:
    assert reason_of(_TIMESFM_MEDIAN_INDEX) == "framework_error"


def test_a_stan_backend_s_own_attribute_bug_is_the_framework_s() -> None:
    assert reason_of(_KATS_PYSTAN_FIT_CLASS) == "framework_error"


def test_the_same_wording_in_the_run_s_own_code_or_an_application_package_stays_the_script_s() -> None:
    # the run's own forecasting script reading an attribute it never set, calling timesfm
    assert (
        reason_of(
            "Traceback (most recent call last):\n"
            '  File "/home/u/forecast/run.py", line 40, in <module>\n'
            "    print(tfm._median_index)\n"
            "AttributeError: 'TimesFmJax' object has no attribute '_median_index'"
        )
        == "script_error"
    )
    # an installed application that is no framework (a model zoo) keeps the interpreter's code-bug wording
    assert (
        reason_of(
            "Traceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.10/site-packages/labml_nn/transformers/train.py", line 88, in run\n'
            "    self.step()\n"
            "AttributeError: 'Trainer' object has no attribute 'step'"
        )
        == "script_error"
    )


# ---------------------------------------------------------------- the Hub's "Entry Not Found"

# SalesforceAIResearch/uni2ts#206 (case 1766): fine-tuning moirai_1.0_R_small, Hydra building the checkpoint path.
_UNI2TS_ENTRY_NOT_FOUND = r"""
Error executing job with overrides: ['run_name=store_sales_finetune', 'model=moirai_1.0_R_small', 'data=train_finetune', 'val_data=val_finetune']
Error in call to target 'huggingface_hub.file_download.hf_hub_download':
EntryNotFoundError('404 Client Error. (Request ID: Root=1-67ecdc3c-383436ba072cbfb134a04b9d;ad7ba49f-6f32-4595-be25-bd95b597f2ee)

Entry Not Found for url: https://huggingface.co/Salesforce/moirai-1.0-R-small/resolve/main/model.ckpt.')
full_key: model.args.checkpoint_path
"""


def test_the_hub_s_entry_not_found_is_a_missing_file() -> None:
    assert reason_and_rule(_UNI2TS_ENTRY_NOT_FOUND) == ("file_not_found", "hub-entry-not-found")


def test_entry_not_found_in_prose_or_another_hub_error_is_not_this_rule() -> None:
    assert reason_of("The entry was not found in the cache; downloading model.safetensors") == "unknown"
    assert reason_and_rule("INFO: entry not found, falling back to the default config")[1] != "hub-entry-not-found"
    # the repository itself unknown (often a gated or private one without a token) is not this rule's
    assert (
        reason_and_rule(
            "huggingface_hub.utils._errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url: https://huggingface.co/api/models/acme/private-model"
        )[1]
        != "hub-entry-not-found"
    )


# ---------------------------------------------------------------- the Trainer finding no loss

# huggingface/transformers#30609 (case 1763): PatchTSMixerForTimeSeriesClassification under the Trainer, the
# user's loop logging the exception's message.
_PATCHTSMIXER_NO_LOSS = r"""
2024-05-02 19:28:39,174 - INFO - Starting model training.

  0%|          | 0/82800 [00:00<?, ?it/s]An error occurred during training: The model did not return a loss from the inputs, only the following keys: prediction_outputs,last_hidden_state. For reference, the inputs it received are past_values.
"""


def test_the_trainer_finding_no_loss_is_the_caller_s_inputs() -> None:
    assert reason_and_rule(_PATCHTSMIXER_NO_LOSS) == ("script_error", "trainer-no-loss-returned")


def test_a_loss_missing_in_prose_is_not_this_rule() -> None:
    assert reason_of("note: the model did not return a loss on the eval set, so only metrics are logged") == "unknown"
