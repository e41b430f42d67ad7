"""The zoo in PyTorch, the source: every model of :mod:`spec`, seeded, its ``state_dict``
saved as numpy arrays for the ports, and recorded by ``rosetta_utils.recorders.pytorch``.
``port(model, weights)`` is the model loaded with them (at PyTorch's own initialisation without),
``framework_inputs`` the spec's arrays as it takes them (as they are)."""

from __future__ import annotations

import numpy as np
import spec
import torch
from torch import nn

#: PyTorch records every layer of every model.
ABSENT: dict[str, set[str]] = {model: set() for model in spec.MODELS}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm_in = nn.LayerNorm(16)
        self.fc1 = nn.Linear(16, 32)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(32, 32)
        self.norm = nn.LayerNorm(32)
        self.tanh = nn.Tanh()
        self.head = nn.Linear(32, 5)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        x = self.gelu(self.fc1(self.norm_in(x)))
        x = self.tanh(self.norm(self.fc2(x)))
        return self.softmax(self.head(x))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2, ceil_mode=True)
        self.conv2 = nn.Conv2d(8, 16, 2)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(256, 10)

    def forward(self, x):
        x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        x = self.pool2(self.relu2(self.conv2(x)))
        return self.fc(self.flatten(x))


class Separable(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 16, 1)
        self.bn = nn.BatchNorm2d(16)
        self.relu6 = nn.ReLU6()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        x = self.relu6(self.bn(self.pw(self.dw(x))))
        return self.fc(self.flatten(self.gap(x)))


class TextConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 16)
        self.conv = nn.Conv1d(16, 24, 5, padding=2)
        self.relu = nn.ReLU()
        self.fc = nn.Linear(24, 3)

    def forward(self, ids):
        x = self.embed(ids).transpose(1, 2)
        x = self.relu(self.conv(x))
        return self.fc(x.amax(dim=2))


class LSTMTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(40, 16)
        self.lstm = nn.LSTM(16, 24, batch_first=True)
        self.fc = nn.Linear(24, 6)

    def forward(self, ids):
        out, _ = self.lstm(self.embed(ids))
        return self.fc(out)


class BiGRU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 12, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(24, 3)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.fc(out)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.norm1 = nn.LayerNorm(16)
        self.ff1 = nn.Linear(16, 32)
        self.relu = nn.ReLU()
        self.ff2 = nn.Linear(32, 16)
        self.norm2 = nn.LayerNorm(16)

    def forward(self, x, pad):
        attended, _ = self.attn(x, x, x, key_padding_mask=pad)
        h = self.norm1(x + attended)
        return self.norm2(h + self.ff2(self.relu(self.ff1(h))))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 256)
        self.relu0 = nn.ReLU()
        self.up1 = nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1)
        self.act1 = nn.LeakyReLU(0.01)
        self.up2 = nn.ConvTranspose2d(8, 3, 3, padding=1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, z):
        x = self.relu0(self.fc(z).reshape(-1, 16, 4, 4))
        x = self.act1(self.up1(x))
        return self.sigmoid(self.up2(x))


BUILDERS = {"mlp": MLP, "cnn": CNN, "separable": Separable, "textconv": TextConv, "lstm": LSTMTagger,
            "bigru": BiGRU, "attention": Attention, "decoder": Decoder}


def build(model: str) -> nn.Module:
    """The model, seeded, with what initialisation leaves trivial set at random: batch norms'
    statistics, scale and shift, layer norms' scale and shift, the attention's biases."""
    torch.manual_seed(0)
    net = BUILDERS[model]()
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.normal_(0, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                module.weight.uniform_(0.5, 1.5)
                module.bias.normal_(0, 0.1)
            elif isinstance(module, nn.LayerNorm):
                module.weight.copy_(1 + 0.1 * torch.randn_like(module.weight))
                module.bias.copy_(0.1 * torch.randn_like(module.bias))
            elif isinstance(module, nn.MultiheadAttention):  # PyTorch starts these biases at zero
                module.in_proj_bias.normal_(0, 0.1)
                module.out_proj.bias.normal_(0, 0.1)
            elif isinstance(module, nn.GRU):
                hidden = module.hidden_size
                for name, param in module.named_parameters():
                    if name.startswith("bias_hh"):
                        param[2 * hidden:].zero_()  # a Flax GRUCell has no recurrent bias in its n gate
    return net.eval()


def source_weights(model: str) -> dict[str, np.ndarray]:
    """The model's ``state_dict`` as float32 numpy arrays (batch norms' counters left out)."""
    return {name: tensor.detach().numpy().astype(np.float32).copy()
            for name, tensor in build(model).state_dict().items() if not name.endswith("num_batches_tracked")}


def load(model: str, weights: dict[str, np.ndarray]) -> nn.Module:
    net = BUILDERS[model]().eval()
    missing, unexpected = net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in weights.items()},
                                              strict=False)
    missing = [name for name in missing if not name.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise KeyError(f"{model}: weights missing {missing}, unexpected {unexpected}")
    return net


def port(model: str, weights: dict[str, np.ndarray] | None = None) -> tuple[nn.Module, dict[str, str]]:
    """The model loaded with ``weights`` (its ``state_dict`` names), or at PyTorch's own
    random initialisation without; and the recorder's ``names`` for it (the spec's)."""
    net = load(model, weights) if weights is not None else BUILDERS[model]().eval()
    return net, {name: name for name in spec.MODELS[model]["layers"] if not name.startswith("input")}


def framework_inputs(model: str, inputs: tuple) -> tuple:
    """The spec's arrays as the model takes them: PyTorch's layout is the spec's."""
    return tuple(inputs)


def forward(model: str, weights: dict[str, np.ndarray], inputs: tuple) -> np.ndarray:
    """The model's final output (no recorder): what the ports are checked against."""
    net = load(model, weights)
    with torch.no_grad():
        return net(*[torch.from_numpy(np.asarray(x)) for x in inputs]).numpy()


def run(model: str, weights: dict[str, np.ndarray], inputs: tuple, trap: str | None = None, path=None):
    """Record the source model (PyTorch plants no trap: it is what the ports are held to)."""
    from rosetta_utils.recorders.pytorch import record

    if trap is not None:
        raise ValueError(f"{trap}: the source plants no trap")
    net, names = port(model, weights)
    return record(net, framework_inputs(model, inputs), names=names, path=path)
