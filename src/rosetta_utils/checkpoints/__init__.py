"""Convert a trained model's checkpoint between the five frameworks' own formats.

For the book's three models, ``cifar10``, ``imdb`` and ``resnet50``::

    python -m rosetta_utils.checkpoints cifar10 model.pt model.weights.h5 --from pytorch --to tensorflow

reads a checkpoint in one framework's own format (a PyTorch state dict, Keras's
``.weights.h5``, a Flax nnx state saved with Orbax, Gluon's ``.params``,
Chainer's ``.npz``) or a ``.safetensors`` file of PyTorch's names, checks that it is the model it names (every name and
shape; a mismatch is an error listing them, and nothing is written), turns it
into the canonical arrays (PyTorch's names and layouts) and writes those in
the other format. The ``canonical`` format is those arrays in a numpy ``.npz``:
MXNet and Chainer live in another environment than PyTorch, TensorFlow and
JAX, so a model crosses between them as a canonical file, converted to it in
one environment and from it in the other.

Modules: :mod:`.models` (the models' names and shapes), :mod:`.layouts` (where
each framework keeps them), :mod:`.formats` (each framework's file; each
framework imported only by the functions that read or write its file),
:mod:`.convert` (one conversion), ``__main__`` (the command line).
"""

from __future__ import annotations

from .convert import Conversion, convert, read_canonical, write_canonical
from .errors import CheckpointError
from .formats import FORMATS
from .layouts import FRAMEWORKS, layout
from .models import MODELS, canonical_names, check_canonical, mismatches

__all__ = [
    "FORMATS",
    "FRAMEWORKS",
    "MODELS",
    "CheckpointError",
    "Conversion",
    "canonical_names",
    "check_canonical",
    "convert",
    "layout",
    "mismatches",
    "read_canonical",
    "write_canonical",
]
