"""The PyTorch files tests/declarations/test_model_files_torch.py wrote into $OIP_MODEL_FILES, served by
`Model.from_file`."""

from __future__ import annotations

import os
from pathlib import Path

from oip_asgi import Model, TensorSpec

directory = Path(os.environ["OIP_MODEL_FILES"])

models = {
    "digits": Model.from_file(directory / "digits.pt2"),
    "digits_batched": Model.from_file(directory / "digits.pt2", max_batch_size=32, max_batch_delay=0.05),
    "scripted": Model.from_file(
        directory / "digits.pt",
        inputs=[TensorSpec("pixels", "FP32", [-1, 64])],
        outputs=[TensorSpec("logits", "FP32", [-1, 10]), TensorSpec("probabilities", "FP32", [-1, 10])],
        labels=[str(digit) for digit in range(10)],
    ),
}
