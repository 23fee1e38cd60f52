"""Encoders z: S -> R^k (paper section 3.1, "Encoder"): observation -> flat embedding h_s."""

import math

import torch
from torch import nn

from xlvin.nn.names import ACTIVATION_NAMES


def orthogonal_init(module: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """Orthogonal weights and zero biases, the PPO convention (ikostrikov, CleanRL)."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(layer.weight, gain)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
    return module


#: The MLP encoder's hidden activations by name.
ACTIVATIONS: dict[str, type[nn.Module]] = dict(zip(ACTIVATION_NAMES, (nn.ReLU, nn.Tanh)))


class MLPEncoder(nn.Module):
    """Three-layer MLP with ReLU for flat observations: in -> 2F -> F -> k (the authors' TransE encoder).

    The paper's classic-control encoders use F = 64 / 32 / 16 (CartPole / Acrobot / MountainCar)
    and k = 50 outputs. `activation` "tanh" puts Tanh in place of ReLU (Stable-Baselines3's
    default for continuous control).
    """

    def __init__(self, obs_dim: int, hidden: int, embedding_dim: int,
                 activation: str = "relu") -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        act = ACTIVATIONS[activation]
        self.net = orthogonal_init(
            nn.Sequential(
                nn.Linear(obs_dim, 2 * hidden),
                act(),
                nn.Linear(2 * hidden, hidden),
                act(),
                nn.Linear(hidden, embedding_dim),
            )
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, *obs_shape] -> h_s [B, k] (observations flattened and cast to float32)."""
        return self.net(obs.flatten(1).float())


class NatureCNN(nn.Module):
    """The DQN / PPO Atari encoder (Mnih et al. 2015): uint8 frames [B, C, 84, 84] -> [B, k]
    (`size`: the frames' side, or their (height, width)).

    /255, Conv(C -> 32, 8, stride 4) -> ReLU -> Conv(32 -> 64, 4, stride 2) -> ReLU ->
    Conv(64 -> 64, 3, stride 1) -> ReLU -> flatten (3136) -> Linear(3136 -> k) -> ReLU. The same
    network as Stable-Baselines3's `NatureCNN` feature extractor and CleanRL's Atari agent.
    """

    def __init__(
        self, in_channels: int = 4, embedding_dim: int = 512, size: int | tuple[int, int] = 84
    ) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        self.convs = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            height, width = (size, size) if isinstance(size, int) else size  # the image's sides
            flat = self.convs(torch.zeros(1, in_channels, height, width)).shape[1]
        self.linear = nn.Linear(flat, embedding_dim)
        orthogonal_init(self)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, C, H, W] (uint8 pixels or floats in [0, 255]) -> h_s [B, k]."""
        x = self.convs(obs.float() / 255.0)
        return torch.relu(self.linear(x))


class SmallCNN(nn.Module):
    """The encoder of images too small for the Nature CNN (under 36x36: MiniGrid's 7x7 view,
    8x8 grids): uint8 images [B, C, H, W], H and W >= 4 -> h_s [B, k].

    / `divisor`, 3 x (Conv 2x2, stride 1 -> ReLU) with 16, 32 and 64 filters (the small kernels of
    the usual MiniGrid agents: every cell is kept), max-pooled to at most 8x8 cells (so that the
    flattened width stays small for images up to 35x35), flatten -> Linear -> k -> ReLU.

    Images this small are mostly symbolic grids, not pixels: MiniGrid's cells hold object, colour
    and state indices up to 10, which /255 would squash to under 0.04 (PPO then barely leaves the
    random policy on MiniGrid-DoorKey-5x5-v0 in 80k steps, where /10 solves it). Hence the
    default `divisor` of 10 (`SMALL_IMAGE_DIVISOR`); pass 255 for small pixel images.
    """

    #: The most cells per side the flattened features keep.
    MAX_CELLS = 8

    def __init__(self, in_channels: int, embedding_dim: int, size: tuple[int, int],
                 divisor: float = 10.0) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        self.divisor = divisor
        cells = tuple(min(side - 3, self.MAX_CELLS) for side in size)
        self.convs = nn.Sequential(
            nn.Conv2d(in_channels, 16, 2),
            nn.ReLU(),
            nn.Conv2d(16, 32, 2),
            nn.ReLU(),
            nn.Conv2d(32, 64, 2),
            nn.ReLU(),
            nn.AdaptiveMaxPool2d(cells),
            nn.Flatten(),
        )
        self.linear = nn.Linear(64 * cells[0] * cells[1], embedding_dim)
        orthogonal_init(self)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, C, H, W] (uint8 or floats) -> h_s [B, k]."""
        return torch.relu(self.linear(self.convs(obs.float() / self.divisor)))


class DictEncoder(nn.Module):
    """The encoder of Dict observations, read as their flat vector [B, D] (the parts one after
    the other: `xlvin.envs.spaces.flatten_parts`) -> h_s [B, k].

    Each image part is cut out, reshaped and read by its own CNN (`images`: part index -> a module
    from the part's numbers [B, size] to features); the other parts, vectors as they are and
    Discrete values one-hot (`states`: part index -> n), are concatenated and read by one MLP
    encoder (`vectors`); all features are concatenated -> Linear -> ReLU -> Linear -> k. The
    heads are linear in h_s, so the parts are mixed here, non-linearly: an action that depends
    on two parts together (MiniGrid's direction and view) needs it.
    """

    def __init__(self, sizes: list[int], images: dict[int, nn.Module], states: dict[int, int],
                 vectors: nn.Module | None, features: int, embedding_dim: int) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        self.sizes, self.states = sizes, states
        self.images = nn.ModuleDict({str(i): module for i, module in images.items()})
        self.vectors = vectors
        self.mix = orthogonal_init(nn.Sequential(
            nn.Linear(features, embedding_dim), nn.ReLU(), nn.Linear(embedding_dim, embedding_dim)
        ))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, D] -> h_s [B, k]."""
        chunks = obs.float().split(self.sizes, dim=1)
        features = [module(chunks[int(i)]) for i, module in self.images.items()]
        rest = [nn.functional.one_hot(chunk[:, 0].long(), self.states[i]).float()
                if i in self.states else chunk
                for i, chunk in enumerate(chunks) if str(i) not in self.images]
        if self.vectors is not None:
            features.append(self.vectors(torch.cat(rest, dim=1)))
        return self.mix(torch.cat(features, dim=1))


class MazeCNN(nn.Module):
    """The paper's maze encoder (appendix D): observations [B, C, H, W] -> h_s [B, k].

    3 x (Conv 3x3, padding 1, `channels` filters -> BatchNorm2d -> ReLU), global average pooling
    over the cells (not a flatten: the same weights read 8x8 and 16x16 mazes), then the two-layer
    MLP channels -> channels -> ReLU -> k. The paper: channels 128, k = 10 (VIN's 10 Q channels).

    BatchNorm's modes follow Stable-Baselines3's PPO (`set_training_mode`): the policy *acts*
    in evaluation mode (collection and evaluation: the running statistics, so an action depends on
    its own observation only, and acting is the function evaluation measures), and *learns* in
    training mode (a PPO minibatch is normalised by its own statistics, which also update the
    running ones). `xlvin.ppo.collect.make_actor` switches the mode around each action.
    """

    def __init__(self, in_channels: int = 3, channels: int = 128, embedding_dim: int = 10) -> None:
        super().__init__()
        self.embedding_dim = embedding_dim
        layers: list[nn.Module] = []
        for c_in in (in_channels, channels, channels):
            layers += [nn.Conv2d(c_in, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU()]
        self.convs = nn.Sequential(*layers)
        self.mlp = nn.Sequential(
            nn.Linear(channels, channels), nn.ReLU(), nn.Linear(channels, embedding_dim)
        )
        orthogonal_init(self)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, C, H, W] -> h_s [B, k]."""
        features = self.convs(obs.float())  # [B, channels, H, W]
        return self.mlp(features.mean(dim=(2, 3)))  # pooled [B, channels] -> [B, k]


class OneHot(nn.Module):
    """The observation adapter of a Discrete(n) observation space: state indices [B] -> one-hot
    vectors [B, n] (float32), which the MLP encoder then reads as flat observations."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B] (integer indices, or floats holding them) -> [B, n]."""
        return nn.functional.one_hot(obs.long(), self.n).float()


class ChannelsFirst(nn.Module):
    """The observation adapter of channels-last images: [B, H, W, C] -> [B, C, H, W], the layout
    the Nature CNN reads."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, H, W, C] -> [B, C, H, W] (a view: no copy)."""
        return obs.permute(0, 3, 1, 2)
