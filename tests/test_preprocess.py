"""The shared ImageNet preprocessing and the peak-memory sampler."""

import numpy as np
import pytest

from rosetta_utils.data import IMAGENET_MEAN, IMAGENET_STD, imagenet_preprocess
from rosetta_utils.memory import PeakMemory


def test_preprocess_resizes_crops_and_normalises():
    images = np.full((2, 3, 32, 32), 0.5, dtype=np.float32)
    images[1, 0] = 1.0
    out = imagenet_preprocess(images)
    assert out.shape == (2, 3, 224, 224) and out.dtype == np.float32
    np.testing.assert_allclose(out[0, :, 100, 100], (0.5 - IMAGENET_MEAN) / IMAGENET_STD, rtol=1e-5)
    assert out[1, 0, 0, 0] == pytest.approx((1.0 - IMAGENET_MEAN[0]) / IMAGENET_STD[0], rel=1e-5)


def test_preprocess_keeps_the_centre():
    images = np.zeros((1, 3, 32, 48), dtype=np.float32)  # wider than tall: the sides are cropped
    images[..., 24] = 1.0  # a bright vertical line in the middle column
    out = imagenet_preprocess(images, resize=64, crop=56)
    column = out[0, 0].mean(axis=0)
    assert abs(int(np.argmax(column)) - 28) <= 2


def test_preprocess_rejects_bad_input():
    with pytest.raises(ValueError, match="NCHW RGB"):
        imagenet_preprocess(np.zeros((2, 32, 32, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="larger than"):
        imagenet_preprocess(np.zeros((1, 3, 8, 8), dtype=np.float32), resize=100, crop=200)


PEAK_OF_A_NEW_BLOCK = """
import numpy as np
from rosetta_utils.memory import PeakMemory, resident_bytes
assert resident_bytes() > 0
with PeakMemory() as peak:
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched, alive when the block ends
print(peak.megabytes)
"""


def test_peak_memory_counts_what_the_block_still_holds():
    """In a fresh interpreter: in this one, frameworks loaded by other tests bring allocators
    that keep freed memory resident and reuse it, so the process need not grow at all."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", PEAK_OF_A_NEW_BLOCK], capture_output=True, text=True, check=True)
    assert float(run.stdout) >= 60


def test_peak_memory_keeps_a_peak_that_was_freed_before_the_end(monkeypatch):
    """The sampler thread's highest reading counts, even if memory fell back since."""
    import threading

    import rosetta_utils.memory as memory

    readings, calls, sampled = iter([100, 900]), [], threading.Event()

    def fake_resident_bytes():  # 100 at entry, 900 at the thread's first reading, 100 ever after
        calls.append(1)
        if len(calls) >= 2:
            sampled.set()
        return next(readings, 100)

    monkeypatch.setattr(memory, "resident_bytes", fake_resident_bytes)
    with PeakMemory(interval=0.001) as peak:
        assert sampled.wait(timeout=30)
    assert peak.bytes == 800
