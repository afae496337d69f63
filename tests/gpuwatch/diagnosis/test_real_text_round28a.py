"""Classes of misses from issue 19's twenty-eighth round (corpus cases 1862-1874, training-data pipelines: DALI,
TensorFlow's input queues and record readers, Hugging Face streaming, decord; 1882-1901, remote sensing: mmrotate,
ReDet, raster-vision, segment-geospatial, PaddleRS, Geo-SAM): the data failing inside a reader that is not torch's
DataLoader, an HTTP server closing the connection mid-request, the Hugging Face Hub answering 5xx for a file,
Windows' out-of-memory by its codes, and the dispatcher's device check in its own words. Error messages are
verbatim from the public reports named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501, RUF001

from __future__ import annotations

from tests.gpuwatch.diagnosis.real_text import reason_and_rule, reason_of

# google/automl#495 (case 1869), davidsandberg/facenet#273 (case 1867), dmlc/decord#162 (case 1872).
_TFRECORD_CORRUPT = """
I1126 10:02:11.553 efficientdet training start
Traceback (most recent call last):
  File "/usr/local/lib/python3.6/dist-packages/tensorflow/python/client/session.py", line 1365, in _do_call
    return fn(*args)
tensorflow.python.framework.errors_impl.DataLossError: corrupted record at 0
     [[{{node IteratorGetNext}}]]
"""
_FIFO_CLOSED = """
  File "/usr/local/lib/python3.5/dist-packages/tensorflow/python/framework/errors_impl.py", line 466, in raise_exception_on_not_ok_status
    pywrap_tensorflow.TF_GetCode(status))
tensorflow.python.framework.errors_impl.OutOfRangeError: FIFOQueue '_1_batch_join/fifo_queue' is closed and has insufficient elements (requested 48, current size 0)
"""
_DECORD = """
video number:19760
libibverbs: Warning: couldn't open config directory '/etc/libibverbs.d'.
decord._ffi.base.DECORDError: [16:56:24] /github/workspace/src/video/video_reader.cc:151: Check failed: st_nb >= 0 (-1381258232 vs. 0) ERROR cannot find video stream with wanted index: -1
"""


def test_the_data_failing_in_a_reader_that_is_not_the_dataloader_is_a_dataloader_error() -> None:
    for text in (_TFRECORD_CORRUPT, _FIFO_CLOSED, _DECORD):
        assert reason_and_rule(text) == ("dataloader_error", "input-pipeline-data"), text


# SmerkyG/gptcore#2 (case 1870): streaming the Pile from the Hub.
_REMOTE_DISCONNECTED = """
$ python cli.py train -c configs/gptcore/small_pile.cfgp
'(ProtocolError('Connection aborted.', RemoteDisconnected('Remote end closed connection without response')), '(Request ID: fd98ddf2-4690-4322-b018-8226d93d2e7d)')' thrown while requesting GET https://huggingface.co/datasets/monology/pile-uncopyrighted/resolve/main/train/14.jsonl.zst
"""

# huggingface/datasets#6577 (case 1871): the Hub's 500 for a parquet file, the URL wrapped by the terminal.
_HUB_500 = """
huggingface_hub.utils._errors.HfHubHTTPError: 500 Server Error: Internal Server Error for url: https://huggingface.co/da
tasets/sanchit-gandhi/concatenated-train-set-label-length-256/resolve/91e6a0cd0356605b021384ded813cfcf356a221c/train/tra
in-02618-of-04012.parquet (Request ID: Root=1-65b18b81-627f2c2943bbb8ab68d19ee2;129537bd-1934-4257-a4d8-1cb774f8e1f8)

Internal Error - We're working hard to fix this as soon as possible!
"""


def test_a_server_closing_the_connection_mid_request_is_the_network() -> None:
    assert reason_and_rule(_REMOTE_DISCONNECTED) == ("network_error", "http-connection-dropped")


def test_the_hub_failing_to_serve_a_file_is_the_store_s() -> None:
    assert reason_and_rule(_HUB_500) == ("storage_error", "object-store-http")
    assert (
        reason_of(
            "huggingface_hub.utils._errors.HfHubHTTPError: 404 Client Error: Not Found for url: https://huggingface.co/x"
        )
        != "storage_error"
    )


# open-mmlab/mmrotate#544 (case 1883): torch's DLLs past Windows' commit limit, the message in Chinese.
_WINERROR_1455 = r"""
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "D:\Anaconda3\envs\openmmlab\lib\multiprocessing\spawn.py", line 116, in spawn_main
    exitcode = _main(fd, parent_sentinel)
OSError: [WinError 1455] 页面文件太小，无法完成操作。Error loading "lib\site-packages\torch\lib\caffe2_detectron_ops_gpu.dll" or one of its dependencies.
"""


def test_windows_out_of_memory_by_its_code_is_the_host_s() -> None:
    assert reason_and_rule(_WINERROR_1455) == ("host_oom", "host-allocator")
    assert (
        reason_of(r'OSError: [WinError 126] The specified module could not be found. Error loading "torch\lib\c10.dll"')
        == "import_error"
    )


# open-mmlab/mmrotate#310 (case 1899): the report's title.
def test_the_dispatcher_s_device_check_is_the_caller_s_mixed_devices() -> None:
    text = "RuntimeError: ReDet: ReResNet: Expected tensor to have cuda DeviceType, but got tensor with cpu DeviceType (while checking arguments for einsum():)"
    assert reason_and_rule(text) == ("script_error", "device-mismatch")
