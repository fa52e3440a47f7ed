"""Networks' first layers for structured observations: packed uint8 rows back to tensors, one input per leaf.

RLlib's ComplexInputNetwork and SB3's CombinedExtractor are the models: image leaves through a conv stack
sized to the image (the Nature CNN and uint8 scaled to [0, 1] from 36x36 up, two 3x3 convs on the values of
smaller, symbolic grids), Discrete and MultiDiscrete leaves
one-hot, the rest flattened; all concatenated before the agent's MLP torso. Reading the row happens on the
network's device, so replay and transfers carry each leaf in its stored dtype.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from apexrl.envs.spaces import Leaf, ObservationCodec, is_channels_last, is_image

MASKED_Q = -1e9  # Q of an illegal action: never the max, and 0 when multiplied by a terminal's 0 discount

_TORCH = {np.dtype(t): getattr(torch, n) for t, n in [
    (np.uint8, "uint8"), (np.int8, "int8"), (np.int16, "int16"), (np.int32, "int32"), (np.int64, "int64"),
    (np.float16, "float16"), (np.float32, "float32"), (np.float64, "float64")]}


def leaf_tensor(rows: torch.Tensor, x: Leaf) -> torch.Tensor:
    """[B, *shape] values of leaf ``x`` from uint8 ``rows`` [B, row_bytes]: a view where aligned."""
    part = rows[:, x.offset:x.offset + x.nbytes]
    if x.dtype.itemsize > 1:
        try:
            part = part.view(_TORCH[x.dtype])
        except RuntimeError:  # rows sliced out of a larger buffer: not aligned for a view
            part = part.contiguous().view(_TORCH[x.dtype])
    return part.reshape(rows.shape[0], *x.shape)


def unpack(codec: ObservationCodec, rows: torch.Tensor) -> Any:
    """The observation's structure (dicts, tuples) of batched tensors, as a user's model receives it:
    Box leaves in their dtype, Discrete/MultiDiscrete as int64 values (their start added back)."""

    def build(space: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(space, gym.spaces.Dict):
            out = {k: build(s, (*path, k)) for k, s in space.spaces.items()}
            return {k: v for k, v in out.items() if v is not None}
        if isinstance(space, gym.spaces.Tuple):
            return tuple(build(s, (*path, i)) for i, s in enumerate(space.spaces))
        x = by_path.get(path)
        if x is None:
            return None
        v = leaf_tensor(rows, x)
        if x.low is not None:
            v = v.long() + torch.as_tensor(x.low, device=v.device)
        return v

    by_path = {x.path: x for x in codec.inputs}
    return build(codec.space, ())


def legal_tensor(codec: ObservationCodec, rows: torch.Tensor) -> torch.Tensor | None:
    if codec.mask_leaf is None:
        return None
    return leaf_tensor(rows, codec.mask_leaf).reshape(rows.shape[0], -1) != 0


class _Image(nn.Module):
    """A conv stack for one image leaf, [B, H, W, C] or [B, C, H, W]."""

    def __init__(self, x: Leaf) -> None:
        super().__init__()
        self.channels_last = is_channels_last(x.shape)
        c, h, w = (x.shape[2], x.shape[0], x.shape[1]) if self.channels_last else x.shape
        # Pixels (36x36 and up) are scaled to [0, 1]; small grids are symbolic (MinAtar's 0/1 cells, MiniGrid's
        # object ids up to ~10), which 1/255 would squash to near zero: MiniGrid-Empty-5x5 then learned nothing
        # in 60 s (greedy 0.0 at 87k env steps)
        self.scale = 1.0 / 255.0 if x.dtype == np.uint8 and min(h, w) >= 36 else 1.0
        if min(h, w) >= 36:
            layers: list[nn.Module] = [nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(), nn.Conv2d(32, 64, 4, stride=2),
                                       nn.ReLU(), nn.Conv2d(64, 64, 3, stride=1), nn.ReLU()]
        else:  # a 7x7 MiniGrid view or a 10x10 grid: two 3x3 convs (one where it is too small for two)
            layers = [nn.Conv2d(c, 16, 3), nn.ReLU()]
            if min(h, w) >= 5:
                layers += [nn.Conv2d(16, 32, 3), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            self.out_features = int(self.net(torch.zeros(1, c, h, w)).shape[1])

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        v = v.float()
        if self.channels_last:
            v = v.permute(0, 3, 1, 2)
        return self.net(v * self.scale if self.scale != 1.0 else v)


class StructuredEncoder(nn.Module):
    """Packed rows -> one feature vector: conv stacks for images, one-hot for discrete leaves, the rest
    flattened, concatenated."""

    def __init__(self, codec: ObservationCodec) -> None:
        super().__init__()
        self.codec = codec
        self.images = nn.ModuleDict()
        flat = 0
        for i, x in enumerate(codec.inputs):
            if is_image(x):
                self.images[str(i)] = _Image(x)
            elif x.kind in ("discrete", "multi_discrete"):
                flat += sum(x.sizes)
            else:
                flat += int(np.prod(x.shape, dtype=np.int64))
        self.out_features = flat + sum(m.out_features for m in self.images.values())  # type: ignore[misc]

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        parts = []
        B = rows.shape[0]
        for i, x in enumerate(self.codec.inputs):
            v = leaf_tensor(rows, x)
            if str(i) in self.images:
                parts.append(self.images[str(i)](v))
            elif x.kind in ("discrete", "multi_discrete"):
                v = v.reshape(B, -1).long()
                parts.extend(F.one_hot(v[:, j].clamp(0, n - 1), n).float() for j, n in enumerate(x.sizes))
            else:
                parts.append(v.reshape(B, -1).float())
        return torch.cat(parts, dim=1)


class MaskedQ(nn.Module):
    """A Q-network on packed rows: ``inner`` gets the rows (built-in networks) or the unpacked structure (a
    user's model), and illegal actions get ``MASKED_Q``, so greedy acting, the actors' priorities and the
    double-DQN target all maximize over legal actions only."""

    def __init__(self, codec: ObservationCodec, inner: nn.Module, structured_input: bool) -> None:
        super().__init__()
        self.codec, self.inner, self.structured_input = codec, inner, structured_input

    def _input(self, rows: torch.Tensor) -> Any:
        return unpack(self.codec, rows) if self.structured_input else rows

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        q = self.inner(self._input(rows))
        legal = legal_tensor(self.codec, rows)
        return q if legal is None else q.masked_fill(~legal, MASKED_Q)

    @property
    def distributional(self) -> bool:
        return bool(getattr(self.inner, "distributional", False))

    def distribution(self, rows: torch.Tensor) -> torch.Tensor:
        """A distributional head's raw output [B, A, N], unmasked: the learner takes the chosen and the best
        legal actions' rows (the latter by ``forward``'s masked means)."""
        return self.inner.distribution(self._input(rows))  # type: ignore[operator]

    def acting_outputs(self, rows: torch.Tensor) -> torch.Tensor:
        """Masked Q-values, or a distributional head's unmasked outputs (its policy masks their means)."""
        return self.inner.acting_outputs(self._input(rows)) if self.distributional else self(rows)  # type: ignore[operator]

    def legal_actions(self, rows: np.ndarray) -> np.ndarray | None:
        return self.codec.legal(rows)
