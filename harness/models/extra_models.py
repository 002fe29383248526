"""Models beyond torchvision's classifiers: micro-models of the classic fusion patterns, and the
non-vision models of the literature suites. Random weights (seeded by the caller); nothing is
downloaded. torch and transformers are imported inside the builders, so the parent process can
read this catalogue without them.

Each entry names its input: `image` [1, 3, S, S], `planes` [1, 64, S, S] (a pattern's feature
map), `features` [1, S], `sequence` [1, S, F] (S steps of F features), `tokens` [1, S] of int64
token ids, `audio` [1, S] samples at 16 kHz. S is the cell's `input_size`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

PLANES = 64
RNN_HIDDEN = 28  # the classic sequential-MNIST cell: 28 rows of 28 pixels
LSTM_LAYERS, LSTM_HIDDEN = 10, 256
MMOE_FEATURES, MMOE_EXPERTS, MMOE_EXPERT_WIDTH, MMOE_TASKS = 100, 4, 64, 2
BERT_VOCAB = 30522
#: The inputs a model may take (the docstring above says each one's shape).
INPUT_KINDS = ("image", "planes", "features", "sequence", "tokens", "audio")
#: The smallest input size a scenario may give any model.
INPUT_SIZE_FLOOR = 16


@dataclass(frozen=True)
class ExtraModel:
    """A model beyond torchvision's: its family, its input (a kind of INPUT_KINDS, and the size a
    scenario that gives none runs it at) and a line about it. A plugin's (harness/models/plugins.py)
    also gives `build`: the cell's seed in, the module out (random weights, on the CPU; the built-in
    ones are built by `build` below)."""

    family: str
    input_kind: str
    input_size: int
    about: str
    features: int = 0  # `sequence` inputs: features per step
    requires: tuple[str, ...] = field(default=())  # Python packages beyond torch
    # A plugin's: the input sizes its forward takes, (smallest, largest or None), where not every
    # size from INPUT_SIZE_FLOOR up (a built-in's are catalog.INPUT_SIZE_LIMITS): a scenario giving
    # another is refused as it is loaded, where its cell failed inside the run.
    input_sizes: tuple[int, int | None] | None = None
    build: Callable[[int], Any] | None = field(default=None, compare=False)


EXTRA_MODELS: dict[str, ExtraModel] = {
    "pattern_conv_bn_relu": ExtraModel("pattern", "planes", 128, "3x3 conv (64 planes, stride 1, pad 1) + batch norm + ReLU"),
    "pattern_dwconv_bn_relu": ExtraModel("pattern", "planes", 128, "depthwise 3x3 conv (64 planes) + batch norm + ReLU"),
    "pattern_conv_bias_act": ExtraModel("pattern", "planes", 56, "3x3 conv with bias (64 planes) + SiLU; run it at batch 64"),
    "pattern_bn_act": ExtraModel("pattern", "planes", 128, "batch norm + ReLU (64 planes)"),
    "pattern_matmul_relu": ExtraModel("pattern", "features", 1024, "matmul (1024x1024, no bias) + ReLU"),
    "pattern_conv_relu_conv": ExtraModel("pattern", "planes", 56, "3x3 conv + ReLU + 1x1 conv: tensor+element+tensor"),
    "pattern_rnn_cell": ExtraModel("pattern", "sequence", 28, "RNN cell, hidden 28, over 28 steps", features=RNN_HIDDEN),
    "pattern_lstm_cell": ExtraModel("pattern", "sequence", 28, "LSTM cell, hidden 28, over 28 steps", features=RNN_HIDDEN),
    "lstm_10x256": ExtraModel("rnn", "sequence", 100, "LSTM, 10 layers, hidden 256, input length 100",
                              features=LSTM_HIDDEN),
    "mmoe_small": ExtraModel("mmoe", "features", MMOE_FEATURES,
                             "multi-gate mixture of experts: 4 experts, 2 tasks, 100 input features"),
    "bert_base": ExtraModel("bert", "tokens", 128, "BERT base (12 layers, hidden 768) from its config, 128 tokens",
                            requires=("transformers",)),
    "wav2vec2_base": ExtraModel("wav2vec2", "audio", 16000, "wav2vec 2.0 base from its config, 1 s of 16 kHz audio",
                                requires=("transformers",)),
}


def input_shape(spec: ExtraModel, size: int) -> tuple[int, ...]:
    """The shape of one sample of the model `spec` describes at input size `size`."""
    return {
        "image": (1, 3, size, size), "planes": (1, PLANES, size, size), "features": (1, size),
        "sequence": (1, size, spec.features), "tokens": (1, size), "audio": (1, size),
    }[spec.input_kind]


def build(name: str) -> Any:
    """A fresh model (random weights from torch's current seed), in eval mode, on the CPU."""
    return _BUILDERS[name]().eval()


def make_inputs(spec: ExtraModel, size: int, count: int, seed: int) -> list[Any]:
    """`count` seeded samples of the model `spec` describes, each of `input_shape(spec, size)`, on
    the CPU: token ids for `tokens`, standard normal values otherwise."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    shape = input_shape(spec, size)
    if spec.input_kind == "tokens":
        return [torch.randint(0, BERT_VOCAB, shape, generator=generator) for _ in range(count)]
    return [torch.randn(shape, generator=generator) for _ in range(count)]


def casts_inputs(spec: ExtraModel) -> bool:
    """Whether the samples take the cell's dtype (token ids stay int64)."""
    return spec.input_kind != "tokens"


# --- builders -------------------------------------------------------------------------------

def _conv_bn_relu() -> Any:
    from torch import nn

    return nn.Sequential(nn.Conv2d(PLANES, PLANES, 3, 1, 1, bias=False), nn.BatchNorm2d(PLANES), nn.ReLU())


def _dwconv_bn_relu() -> Any:
    from torch import nn

    return nn.Sequential(nn.Conv2d(PLANES, PLANES, 3, 1, 1, groups=PLANES, bias=False), nn.BatchNorm2d(PLANES), nn.ReLU())


def _conv_bias_act() -> Any:
    from torch import nn

    return nn.Sequential(nn.Conv2d(PLANES, PLANES, 3, 1, 1, bias=True), nn.SiLU())


def _bn_act() -> Any:
    from torch import nn

    return nn.Sequential(nn.BatchNorm2d(PLANES), nn.ReLU())


def _matmul_relu() -> Any:
    from torch import nn

    return nn.Sequential(nn.Linear(1024, 1024, bias=False), nn.ReLU())


def _conv_relu_conv() -> Any:
    from torch import nn

    return nn.Sequential(nn.Conv2d(PLANES, PLANES, 3, 1, 1), nn.ReLU(), nn.Conv2d(PLANES, PLANES, 1))


def _unrolled(cell_type: str) -> Any:
    import torch
    from torch import nn

    class Unrolled(nn.Module):
        """A recurrent cell applied step by step: the loop an RNN runtime unrolls."""

        def __init__(self) -> None:
            super().__init__()
            self.cell = (nn.LSTMCell if cell_type == "lstm" else nn.RNNCell)(RNN_HIDDEN, RNN_HIDDEN)

        def forward(self, x: Any) -> Any:
            h = torch.zeros(x.shape[0], RNN_HIDDEN, dtype=x.dtype, device=x.device)
            c = torch.zeros_like(h)
            for step in range(x.shape[1]):
                if cell_type == "lstm":
                    h, c = self.cell(x[:, step], (h, c))
                else:
                    h = self.cell(x[:, step], h)
            return h

    return Unrolled()


def _lstm() -> Any:
    from torch import nn

    class StackedLSTM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(LSTM_HIDDEN, LSTM_HIDDEN, num_layers=LSTM_LAYERS, batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.lstm(x)[0]

    return StackedLSTM()


def _mmoe() -> Any:
    import torch
    from torch import nn

    class MMoE(nn.Module):
        """Experts shared by all tasks, one softmax gate and one tower per task (Ma et al., KDD 2018)."""

        def __init__(self) -> None:
            super().__init__()
            self.experts = nn.ModuleList(
                nn.Sequential(nn.Linear(MMOE_FEATURES, MMOE_EXPERT_WIDTH), nn.ReLU()) for _ in range(MMOE_EXPERTS)
            )
            self.gates = nn.ModuleList(nn.Linear(MMOE_FEATURES, MMOE_EXPERTS) for _ in range(MMOE_TASKS))
            self.towers = nn.ModuleList(
                nn.Sequential(nn.Linear(MMOE_EXPERT_WIDTH, 32), nn.ReLU(), nn.Linear(32, 1)) for _ in range(MMOE_TASKS)
            )

        def forward(self, x: Any) -> Any:
            experts = torch.stack([expert(x) for expert in self.experts], dim=1)  # [N, E, W]
            outputs = []
            for gate, tower in zip(self.gates, self.towers):
                weights = torch.softmax(gate(x), dim=-1).unsqueeze(-1)  # [N, E, 1]
                outputs.append(tower((weights * experts).sum(dim=1)))
            return torch.cat(outputs, dim=-1)

    return MMoE()


def _hidden_states(model: Any) -> Any:
    from torch import nn

    class LastHiddenState(nn.Module):
        """The encoder's last hidden state as a plain tensor (what every backend can return)."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any) -> Any:
            return self.model(x).last_hidden_state

    return LastHiddenState()


def _bert() -> Any:
    from transformers import BertConfig, BertModel

    return _hidden_states(BertModel(BertConfig(attn_implementation="eager"), add_pooling_layer=False))


def _wav2vec2() -> Any:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    return _hidden_states(Wav2Vec2Model(Wav2Vec2Config(attn_implementation="eager")))


_BUILDERS: dict[str, Callable[[], Any]] = {
    "pattern_conv_bn_relu": _conv_bn_relu,
    "pattern_dwconv_bn_relu": _dwconv_bn_relu,
    "pattern_conv_bias_act": _conv_bias_act,
    "pattern_bn_act": _bn_act,
    "pattern_matmul_relu": _matmul_relu,
    "pattern_conv_relu_conv": _conv_relu_conv,
    "pattern_rnn_cell": lambda: _unrolled("rnn"),
    "pattern_lstm_cell": lambda: _unrolled("lstm"),
    "lstm_10x256": _lstm,
    "mmoe_small": _mmoe,
    "bert_base": _bert,
    "wav2vec2_base": _wav2vec2,
}
