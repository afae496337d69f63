"""Classes of misses from issue 19's rounds one hundred and seventy-three to one hundred and seventy-six (corpus
cases 6120-6229: reports found by generic queries that show at least one line the failing run printed: LLM
inference and generation, vision fine-tuning, speech and audio, containers and hosted notebooks; taken as the search
returned them), and one older case the same class covers (6101). Error messages are verbatim from the public reports
named in each test; hosts, paths and pids may be made up."""
# ruff: noqa: E501

from __future__ import annotations

import pytest

from tests.gpuwatch.diagnosis.real_text import reason_and_rule


@pytest.mark.parametrize(
    ("text", "reason", "rule", "name"),
    [
        # AUTOMATIC1111/stable-diffusion-webui#9260 (case 6101): Embedding (textual inversion) training in the Stable Diffusion web UI on an M1 Ultra crashes in an MPS add; only macOS's crash report JSON is pasted, and the workaround is --no-hal ...
        (
            '# [Bug]: MPS.add Error(Embedding, Apple Silicon M1 Ultra\n  "threads" : [{"id":452779,"queue":"com.apple.main-thread","frames":[{"imageOffset":49456,"symbol":"__select","symbolLocation":8,"imageIndex":0},{"imageOffset":2231088,"symbol":"time_sleep","symbolLocation":184,"imageIndex":1},{"imageOffset":772716,"symbol":"cfunction_vectorcall_O","symbolLocation":100,"imageIndex":1},{"imageOffset":1461496,"symbol":"call_function","symbolLocation":128,"imageIndex":1},{"imageOffset":1451280,"symbol":"_PyEval_EvalFrameDefault","symbolLocation":43104,"imageIndex":1},{"imageOffset":1403484,"symbol":"_PyEval_Vector","symbolLocation":376,"imageIndex":1},{"imageOffset":1461496,"symbol":"call_function","symbolLocation":128,"imageIndex":1},{"imageOffset":1451320,"symbol":"_PyEval_EvalFrameDefault","symbolLocation":43144,"imageIndex":1},{"imageOffset":1403484,"symbol":"_PyEval_Vector","symbolLocation":376,"imageIndex":1},{"imageOffset":1461496,"symbol":"call_function","symbolLocation":128,"imageIndex":1},...\n',
            "framework_error",
            "macos-crash-report",
            "crash.log",
        ),
        # vladmandic/sdnext#3865 (case 6126): SD.Next SDXL text-to-image with the seed generator on 'cuda' while the latents are made on the CPU: 'ValueError: Cannot generate a cpu tensor from a generator of type cuda.' (the e ...
        (
            "# [Issue]: ValueError: Cannot generate a cpu tensor from a generator of type cuda.\n20:09:34-218181 DEBUG    Prompt tokenizer: parser=Full len=223 sections=1 tokens=51 weights=1.00/1.00/1.00\n20:10:25-673795 TRACE    Server: alive=True requests=620 memory=2.8/31.93 status='running' task='Load'\n                         timestamp='20250412200822' id='task(uuhk14n6lvmb3r7)' job=0 jobs=0 total=1 step=0 steps=0\n                         queued=0 uptime=134 elapsed=122.8 eta=None progress=0\n20:12:26-401888 TRACE    Server: alive=True requests=780 memory=3.06/31.93 status='running' task='Load'\n                         timestamp='20250412200822' id='task(uuhk14n6lvmb3r7)' job=0 jobs=0 total=1 step=0 steps=0\n                         queued=0 uptime=254 elapsed=243.53 eta=None progress=0\n20:13:56-323385 INFO     Available LoRAs: path=\"models\\Lora\" items=72 folders=2 time=0.01\n20:13:56-324388 ERROR    Network load: type=LoRA name=\"Fals\" detected=None failed\n20:13:56-436119 INFO     Base: pipeline=StableDiffusionXLPipeline task=TEXT_2_IMAGE batch=1/1x1 set={'guidance_scale':\n                         6, 'generator': 'cuda:[2485610422]', 'num_inference_steps': 20, 'eta': 1.0, 'guidance_rescale':\n                         0, 'denoising_end': None, 'output_type': 'latent', 'width': 1024, 'height': 1024, 'parser':\n                         'Full', 'prompt': 'embeds'}\n",
            "script_error",
            "device-placement-mismatch",
            "sdnext.log",
        ),
        # Anbeeld/beellama.cpp#65 (case 6129): beellama.cpp's llama-server with DFlash speculative decoding on several GPUs aborts in ggml_cuda_error from ggml_backend_cuda_synchronize during llama_decode; the title's Xid 8 (a  ...
        (
            "# Eval bug: Xid 8 gpu timeout Crash during code with multi GPU inference, DFlash\nJun 10 06:58:10 zach-B650-GAMING-X-AX-V2 llama-server[147820]: #2  0x0000752078d28aab in ggml_abort () from /home/zach/dev/beellama.cpp/build/bin/libggml-base.so.0\nJun 10 06:58:10 zach-B650-GAMING-X-AX-V2 llama-server[147820]: #3  0x0000752071c17297 in ggml_cuda_error(char const*, char const*, char const*, int, char const*) () from /home/zach/dev/beellama.cpp/build/bin/libggml-cuda.so.0\nJun 10 06:58:10 zach-B650-GAMING-X-AX-V2 llama-server[147820]: #4  0x0000752071c18988 in ggml_backend_cuda_synchronize(ggml_backend*) () from /home/zach/dev/beellama.cpp/build/bin/libggml-cuda.so.0\nJun 10 06:58:10 zach-B650-GAMING-X-AX-V2 llama-server[147820]: #5  0x0000752078d42d1e in ggml_backend_sched_synchronize () from /home/zach/dev/beellama.cpp/build/bin/libggml-base.so.0\nJun 10 06:58:10 zach-B650-GAMING-X-AX-V2 llama-server[147820]: #6  0x0000752077d0df34 in llama_context::decode(llama_batch const&) () from /home/zach/dev/beellama.cpp/build/bin/libllama.so.0\nJun 10 06:58:10 zach-B650-GAMING-X-AX-V2 llama-server[147820]: #7  0x0000752077d1195f in llama_decode () from /home/zach/dev/beellama.cpp/build/bin/libllama.so.0\n",
            "cuda_error",
            "ggml-cuda-error-frame",
            "journal.log",
        ),
        # huggingface/text-generation-inference#249 (case 6132): text-generation-inference serving bloom-7b1: two concurrent requests (batch size 2) fail with 'Server error: not enough values to unpack (expected 4, got 3)'; a maintainer owned th ...
        (
            '# Concurrent issue - batch size can not be greater than 1\nab -n 10 -c 2 -p post_data.json -T application/json -H \'accept: application/json\' http://localhost:8080/generate\ndata:{"error":"Request failed during generation: Server error: not enough values to unpack (expected 4, got 3)","error_type":"generation"}\n',
            "framework_error",
            "generation-server-error",
            "client.log",
        ),
        # EricFillion/happy-transformer#220 (case 6133): happytransformer 2.2.1 on a Colab GPU: generate_text after train fails with 'Input, output and indices must be on the current device', the model moved to the GPU by training while  ...
        (
            "# When Using a GPU: HappyTextGeneration.generate_text() Error After Training/Evaluating\nRuntimeError: Input, output and indices must be on the current device\n",
            "script_error",
            "device-placement-mismatch",
            "colab.log",
        ),
        # oobabooga/textgen#6759 (case 6138): text-generation-webui with a Llama 3.3 70B GGUF (StreamingLLM, heavy logprobs) fails at random with 'llama_decode: failed to decode, ret = 1' and 'RuntimeError: llama_decode return ...
        (
            '# Random inference failures\nllama_decode: failed to decode, ret = 1\nTraceback (most recent call last):\n  File "/home/superuser/text-generation-webui/modules/callbacks.py", line 59, in gentask\n    ret = self.mfunc(callback=_callback, *args, **self.kwargs)\n          ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n  File "/home/superuser/text-generation-webui/modules/text_generation.py", line 432, in generate_with_callback\n    shared.model.generate(**kwargs)\n',
            "framework_error",
            "llama-decode-failed",
            "webui.log",
        ),
        # apple/ml-cvnets#29 (case 6153): Fine-tuning an ADE20k-pretrained MobileNetV2 segmentation model on a 10-class custom dataset: loading the weights fails with size mismatch for seg_head.classifier.block.conv.bias ( ...
        (
            "# Segmentation Head for Custom Dataset is not automatically connected!\nmismatch for seg_head.classifier.block.conv.bias: copying a param with shape torch.Size([150]) from checkpoint, the shape in current model is torch.Size([10])\n",
            "checkpoint_load_error",
            "state-dict-mismatch",
            "train.log",
        ),
        # matterport/Mask_RCNN#1846 (case 6154): Mask R-CNN (Keras 2.1.0, TF 1.14, RTX 2080 Ti on Windows) training of the heads stops at once with a bare StopIteration from model.train in a notebook; Keras' fit_generator raises  ...
        (
            "# StopIteration while training.\nStopIteration                             Traceback (most recent call last)\n<ipython-input-22-83fb3ae74319> in <module>\n      6             learning_rate=config.LEARNING_RATE,\n      7             epochs=1,\n----> 8             layers='heads')\n",
            "dataloader_error",
            "generator-exhausted",
            "train.log",
        ),
        # matterport/Mask_RCNN#1258 (case 6155): Training Mask R-CNN on the balloon sample (GTX 1050 2GB, Windows) fails at Epoch 1/30 with StopIteration raised by Keras' data_utils get() inside fit_generator: the data generator' ...
        (
            'F:\\Anaconda3\\envs\\MaskRCNN\\lib\\site-packages\\tensorflow\\python\\ops\\gradients_impl.py:96: UserWarning: Converting sparse IndexedSlices to a dense Tensor of unknown shape. This may consume a large amount of memory.\n  "Converting sparse IndexedSlices to a dense Tensor of unknown shape. "\nEpoch 1/30\nTraceback (most recent call last):\n  File "balloon.py", line 364, in <module>\n    train(model)\n  File "balloon.py", line 199, in train\n    layers=\'heads\')\n  File "F:\\Anaconda3\\envs\\MaskRCNN\\lib\\site-packages\\mask_rcnn-2.1-py3.6.egg\\mrcnn\\model.py", line 2375, in train\n  File "F:\\Anaconda3\\envs\\MaskRCNN\\lib\\site-packages\\keras\\legacy\\interfaces.py", line 87, in wrapper\n    return func(*args, **kwargs)\n  File "F:\\Anaconda3\\envs\\MaskRCNN\\lib\\site-packages\\keras\\engine\\training.py", line 2065, in fit_generator\n    generator_output = next(output_generator)\n  File "F:\\Anaconda3\\envs\\MaskRCNN\\lib\\site-packages\\keras\\utils\\data_utils.py", line 710, in get\n    raise StopIteration()\nStopIteration\n',
            "dataloader_error",
            "generator-exhausted",
            "train.log",
        ),
        # matterport/Mask_RCNN#102 (case 6156): Mask R-CNN training on COCO 35k-val images dies at step 295 of epoch 6 with StopIteration from Keras' fit_generator; the maintainer reads it as the data generator failing (missing  ...
        (
            '295/1000 [=======>......................] - ETA: 11:56 - loss: 1.3895 - rpn_class_loss: 0.0333 - \nrpn_bbox_loss: 0.5186 - mrcnn_class_loss: 0.3381 - mrcnn_bbox_loss: 0.2326 - mrcnn_mask_loss: 0.2669\nTraceback (most recent call last):\nFile "coco.py", line 397, in <module>  layers=\'heads\')\nFile "D:\\work\\code\\matterportMask_RCNN\\Mask_RCNN-master\\model.py", line 2183,in train\n  **fit_kwargs\nFile "G:\\Anaconda3\\lib\\site-packages\\keras\\legacy\\interfaces.py", line 87, in wrapper\n  return func(*args, **kwargs)\nFile "G:\\Anaconda3\\lib\\site-packages\\keras\\engine\\training.py", line 2083, in fit_generator\n  generator_output = next(output_generator)\nStopIteration\n',
            "dataloader_error",
            "generator-exhausted",
            "train.log",
        ),
        # roytseng-tw/Detectron.pytorch#60 (case 6162): Fine-tuning the pretrained e2e_mask_rcnn_R-101-FPN_2x Detectron model on a custom dataset with a different number of classes fails right after 'loading Detectron weights': the trac ...
        (
            '# Help with finetuning on custom dataset\nINFO train_net_step.py: 318: loading Detectron weights .../mask-rcnn.pytorch/detectron/e2e_mask_rcnn_R-101-FPN_2x/model_final.pkl\nTraceback (most recent call last):\n  File "tools/train_net_step.py", line 439, in <module>\n    main()\n  File "tools/train_net_step.py", line 319, in main\n    load_detectron_weight(maskRCNN, args.load_detectron)\n  File ".../mask-rcnn.pytorch/lib/utils/detectron_weight_helper.py", line 21, in load_detectron_weight\n    p_tensor.copy_(torch.Tensor(src_blobs[d_name]))\n',
            "checkpoint_load_error",
            "cut-in-checkpoint-loading",
            "train.log",
        ),
        # facebookresearch/Detectron#939 (case 6163): Detectron training of a one-class dataset (NUM_CLASSES: 2) from a COCO-pretrained model: initialize_gpu_from_weights_file asserts that the workspace blob's shape matches the weight ...
        (
            'INFO net.py:  96: fc6_b [+ momentum] loaded from weights file into gpu_0/fc6_b: (1024,)\nINFO net.py:  96: fc7_w [+ momentum] loaded from weights file into gpu_0/fc7_w: (1024, 1024)\nINFO net.py:  96: fc7_b [+ momentum] loaded from weights file into gpu_0/fc7_b: (1024,)\nINFO net.py:  96: cls_score_w [+ momentum] loaded from weights file into gpu_0/cls_score_w: (81, 1024)\nTraceback (most recent call last):\n  File "tools/train_net.py", line 138, in <module>\n    main()\n  File "tools/train_net.py", line 120, in main\n    checkpoints = detectron.utils.train.train_model()\n  File "/media/fangjt/3dc196fc-1311-49bb-ad24-5f77d8735211/Detectron-master/detectron/utils/train.py", line 58, in train_model\n    setup_model_for_training(model, weights_file, output_dir)\n  File "/media/fangjt/3dc196fc-1311-49bb-ad24-5f77d8735211/Detectron-master/detectron/utils/train.py", line 174, in setup_model_for_training\n    nu.initialize_gpu_from_weights_file(model, weights_file, gpu_id=0)\n  File "/media/fangjt/3dc196fc-1311-49bb-ad24-5f77d8735211/Detectron-master/detectron/utils/net.py", line 109, in initialize_gpu_from_weights_file\n    src_blobs[src_name].shape)\nAssertionError: Workspace b\n',
            "checkpoint_load_error",
            "exception-AssertionError",
            "train.log",
        ),
        # ildoonet/tf-pose-estimation#383 (case 6165): tf-pose-estimation's mobilenet_thin training ends with 'optimization finished' and then the pose_dataset feeder thread logs '[ERROR] err type1, placeholders=[...]' and exits, after ...
        (
            "2019-01-22 14:30:56.479582: W tensorflow/core/kernels/queue_base.cc:277] _0_fifo_queue: Skipping cancelled enqueue attempt with queue not closed\n[2019-01-22 14:30:56,479] [train] [INFO] optimization finished. 169.224656\n[2019-01-22 14:30:56,481] [pose_dataset] [ERROR] err type1, placeholders=[<tf.Tensor 'image:0' shape=(4, 368, 368, 3) dtype=float32>, <tf.Tensor 'heatmap:0' shape=(4, 46, 46, 19) dtype=float32>, <tf.Tensor 'vectmap:0' shape=(4, 46, 46, 38) dtype=float32>]\n[2019-01-22 14:30:56,482] [pose_dataset] [INFO] Thread-1 Exited.\n",
            "dataloader_error",
            "dataset-logger-error",
            "train.log",
        ),
        # facebookresearch/Detectron#267 (case 6166): Detectron e2e keypoint R-CNN trained on one GPU from a config copied from the 8-GPU one: a Caffe2 PythonOp raises 'AssertionError: Negative areas founds' in Detectron's boxes_area; ...
        (
            "(caffe2) zoud@i7:~/Workspace/Github/7oud/Detectron$ python2 tools/train_net.py --cfg configs/12_2017_baselines/e2e_keypoint_rcnn_R-50-FPN_1x_1gpu.yaml OUTPUT_DIR tmp/detectron-output/\nI0310 15:33:29.882928  8712 operator.cc:173] Operator with engine CUDNN is not available for operator SafeEnqueueBlobs.\nE0310 15:33:31.579140  8743 pybind_state.h:422] Exception encountered running PythonOp function: AssertionError: Negative areas founds\n\nAt:\n  /home/zoud/Workspace/Github/7oud/Detectron/lib/utils/boxes.py(62): boxes_area\n",
            "framework_error",
            "engine-operator-failed",
            "train.log",
        ),
        # deepjavalibrary/djl#190 (case 6172): Training an object detector on a custom dataset with DJL: the accuracy evaluator's update copies a label array to the CPU and MXNet's TBlob.get_with_shape check fails (65 vs. 285 e ...
        (
            'XNet engine call failed: TBlob.get_with_shape: Check failed: this->shape_.Size() == static_cast<size_t>(shape.Size()) (65 vs. 285) : new and old shape do not match total elements\nStack trace:\n  File "../include/mxnet/./tensor_blob.h", line 311\n\nai.djl.engine.EngineException: MXNet engine call failed: TBlob.get_with_shape: Check failed: this->shape_.Size() == static_cast<size_t>(shape.Size()) (65 vs. 285) : new and old shape do not match total elements\nStack trace:\n  File "../include/mxnet/./tensor_blob.h", line 311\n\n\tat ai.djl.mxnet.jna.JnaUtils.checkCall(JnaUtils.java:1808)\n\tat ai.djl.mxnet.jna.JnaUtils.syncCopyToCPU(JnaUtils.java:475)\n\tat ai.djl.mxnet.engine.MxNDArray.toByteBuffer(MxNDArray.java:280)\n\tat ai.djl.ndarray.NDArray.toLongArray(NDArray.java:300)\n\tat ai.djl.ndarray.NDArray.getLong(NDArray.java:558)\n\tat ai.djl.training.evaluator.AbstractAccuracy.lambda$updateAccumulator$1(AbstractAccuracy.java:85)\n\tat java.base/java.util.concurrent.ConcurrentHashMap.compute(ConcurrentHashMap.java:1932)\n\tat ai.djl.training.evaluator.AbstractAccuracy.updateAccumulator(AbstractAccuracy.java:85)\n\tat ai.djl.training.listener.EvaluatorTrainingListener.updateEvaluators(EvaluatorTrainingListener.java:147)\n',
            "framework_error",
            "engine-operator-failed",
            "train.log",
        ),
        # vasistalodagala/whisper-finetune#11 (case 6181): Whisper fine-tuning on custom English speech with learning_rate near 3e-3: after one epoch eval_loss is nan with eval_wer 100.0, the training loss jumps to 2.41 and then reads 0.0; ...
        (
            "# fine-tuning does not seem to improve/converge\n{'loss': 1.2395, 'learning_rate': 0.001488, 'epoch': 0.13}\n{'loss': 1.8445, 'learning_rate': 0.002988, 'epoch': 0.27}\n{'loss': 1.8692, 'learning_rate': 0.002979891891891892, 'epoch': 0.4}\n{'loss': 1.8025, 'learning_rate': 0.0029596621621621622, 'epoch': 0.53}\n{'loss': 1.7203, 'learning_rate': 0.002939391891891892, 'epoch': 0.67}\n{'loss': 1.5855, 'learning_rate': 0.0029191621621621625, 'epoch': 0.8}\n{'loss': 1.5751, 'learning_rate': 0.002900716216216216, 'epoch': 0.93}\n{'eval_loss': nan, 'eval_wer': 100.0, 'eval_runtime': 22.4018, 'eval_samples_per_second': 2.232, 'eval_steps_per_second': 0.312, 'epoch': 1.0}\n{'loss': 2.4114, 'learning_rate': 0.002896135135135135, 'epoch': 1.07}\n{'loss': 0.0, 'learning_\n",
            "loss_divergence",
            "loss-nan",
            "train.log",
        ),
        # googlecolab/colabtools#1038 (case 6210): A Keras model.fit on Colab ends with Colab's own notice 'Your session is crashed.Automatically restarting', on GPU and on TPU alike; a notebook kernel that died with no cause shown ...
        (
            "# Your session is crashed.Automatically restarting\nmodel_train = model.fit(train_X, train_ground, batch_size=batch_size,epochs=epochs,verbose=1,validation_data=(valid_X, valid_ground))\nYour session is crashed.Automatically restarting\n",
            "host_oom",
            "notebook-session-crashed",
            "train.log",
        ),
        # OptimalScale/LMFlow#304 (case 6219): LMFlow's run_finetune.sh on Colab: the deepspeed launcher finds no GPU and raises RuntimeError: Unable to proceed, no GPU resources available; the maintainers point to a runtime wi ...
        (
            '[2023-04-24 16:32:24,796] [WARNING] [runner.py:186:fetch_hostfile] Unable to find hostfile, will proceed with training with local resources only.\nTraceback (most recent call last):\n  File "/usr/local/bin/deepspeed", line 6, in <module>\n    main()\n  File "/usr/local/lib/python3.10/site-packages/deepspeed/launcher/runner.py", line 411, in main\n    raise RuntimeError("Unable to proceed, no GPU resources available")\nRuntimeError: Unable to proceed, no GPU resources available\n',
            "argument_error",
            "no-gpu-where-launched",
            "train.log",
        ),
        # plantcad/plantcad#7 (case 6220): Loading PlantCaduceus with trust_remote_code on a Colab runtime without a GPU: triton raises RuntimeError: 0 active drivers ([]). There should only be one.; the fix was choosing a  ...
        (
            '---------------------------------------------------------------------------\nRuntimeError                              Traceback (most recent call last)\n[<ipython-input-5-25c22d1c3f75>](https://localhost:8080/#) in <cell line: 0>()\n      1 model_path = \'kuleshov-group/PlantCaduceus_l20\'\n      2 device = "cuda:0" if torch.cuda.is_available() else "cpu"\n----> 3 model = AutoModelForMaskedLM.from_pretrained(model_path, trust_remote_code=True, device_map=device)\n      4 model.eval()\n\n18 frames\n[/usr/local/lib/python3.11/dist-packages/triton/runtime/driver.py](https://localhost:8080/#) in _create_driver()\n      6     actives = [x.driver for x in backends.values() if x.driver.is_active()]\n      7     if len(actives) != 1:\n----> 8         raise RuntimeError(f"{len(actives)} active drivers ({actives}). There should only be one.")\n      9     return actives[0]()\n     10 \n\nRuntimeError: 0 active drivers ([]). There should only be one.\n',
            "argument_error",
            "no-gpu-where-launched",
            "train.log",
        ),
        # mlcommons/training#689 (case 6223): Starting the MLPerf unet3d training container with --runtime=nvidia on Fedora where the CUDA container support could not be installed: docker: Error response from daemon: unknown o ...
        (
            "[stg@oq1 pytorch]$ sudo docker run --ipc=host -it --rm --runtime=nvidia -v /mnt/pytorch/mlperf/1/training/image_segmentation/pytorch/raw-data-dir:/raw_data -v /mnt/pytorch/mlperf/1/training/image_segmentation/pytorch/data:/data -v /mnt/pytorch/mlperf/1/training/image_segmentation/pytorch/results:/results unet3d:latest /bin/bash\n[sudo] password for stg: \ndocker: Error response from daemon: unknown or invalid runtime name: nvidia.\nSee 'docker run --help'.\n[stg@oq1 pytorch]$ \n",
            "import_error",
            "gpu-install-mismatch",
            "train.log",
        ),
        # Linaqruf/kohya-trainer#24 (case 6224): Kohya trainer on Colab stops at the start of training with FATAL: this function is for sm80, but was built for sm750 (an A100 given a wheel built for the T4); the answer was to bui ...
        (
            "# Fatal Error using colab when starting training: google colab\nFATAL: this function is for sm80, but was built for sm750\n",
            "import_error",
            "gpu-install-mismatch",
            "train.log",
        ),
        # TheLastBen/fast-stable-diffusion#2827 (case 6226): fast-DreamBooth on Colab worked for days, then train_dreambooth.py fails importing bitsandbytes: Exception: CUDA SETUP: Setup Failed!; the library cannot load its CUDA binary in th ...
        (
            'Traceback (most recent call last):\n  File "/content/diffusers/examples/dreambooth/train_dreambooth.py", line 803, in <module>\n    main()\n  File "/content/diffusers/examples/dreambooth/train_dreambooth.py", line 535, in main\n    import bitsandbytes as bnb\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/__init__.py", line 6, in <module>\n    from .autograd._functions import (\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/autograd/_functions.py", line 5, in <module>\n    import bitsandbytes.functional as F\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/functional.py", line 13, in <module>\n    from .cextension import COMPILED_WITH_CUDA, lib\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/cextension.py", line 41, in <module>\n    lib = CUDALibrary_Singleton.get_instance().lib\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/cextension.py", line 37, in get_instance\n    cls._instance.initialize()\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/cextension.py", line 27, in initialize\n    raise Exception(\'CUDA SETUP: Setup Failed!\')\nException: CUDA SETUP: Setup Failed!\nTraceback (most recent call last):\n  File "/usr/local/bin/accelerate", line 8, in <module>\n    sys.exit(main())\n',
            "import_error",
            "gpu-install-mismatch",
            "train.log",
        ),
        # TheLastBen/fast-stable-diffusion#2706 (case 6227): With the current fast-DreamBooth Colab, 'Training the UNet...' ends at once in import bitsandbytes with Exception: CUDA SETUP: Setup Failed!; bitsandbytes cannot find its CUDA libr ...
        (
            'Training the UNet...\n...\nTraceback (most recent call last):\n  File "/content/diffusers/examples/dreambooth/train_dreambooth.py", line 803, in <module>\n    main()\n  File "/content/diffusers/examples/dreambooth/train_dreambooth.py", line 535, in main\n    import bitsandbytes as bnb\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/__init__.py", line 6, in <module>\n    from .autograd._functions import (\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/autograd/_functions.py", line 5, in <module>\n    import bitsandbytes.functional as F\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/functional.py", line 13, in <module>\n    from .cextension import COMPILED_WITH_CUDA, lib\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/cextension.py", line 41, in <module>\n    lib = CUDALibrary_Singleton.get_instance().lib\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/cextension.py", line 37, in get_instance\n    cls._instance.initialize()\n  File "/usr/local/lib/python3.10/dist-packages/bitsandbytes/cextension.py", line 27, in initialize\n    raise Exception(\'CUDA SETUP: Setup Failed!\')\nException: CUDA SETUP: Setup Failed!\nTraceback (most recent call last):\n  File "/usr/local/bin/accelerate", line 8, in <module>\n    sys.exit(main())\n',
            "import_error",
            "gpu-install-mismatch",
            "train.log",
        ),
    ],
)
def test_round173_class(text: str, reason: str, rule: str, name: str) -> None:
    assert reason_and_rule(text, name) == (reason, rule)


def test_a_finite_loss_in_a_trainers_dict_is_not_divergence() -> None:
    assert reason_and_rule("{'loss': 0.4, 'grad_norm': 1.2, 'epoch': 1.0}\n{'eval_loss': 0.31, 'epoch': 1.0}\n") == (
        "unknown",
        None,
    )


def test_a_stopiteration_before_the_runs_own_error_gives_way() -> None:
    text = "StopIteration\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nKeyError: 'labels'\n"
    assert reason_and_rule(text) == ("script_error", "exception-KeyError")
