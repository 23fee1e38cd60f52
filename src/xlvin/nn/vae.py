"""A VAE world model in place of TransE: the paper's appendix "world models" variant (figure 10).

The paper (Deac et al. 2021, appendix, "world models") replaced its Atari transition model with
"a variant that learns representations through pixel-based reconstructions (using a VAE
objective, as done by Ha & Schmidhuber 2018)" and found the encodings converged to a fixed point
and the reconstructions ignored the foreground. It gives no architecture; ours:

- posterior q(z | s) = N(mu, diag(exp(logvar))): mu = h_s, the encoder's embedding itself (what
  the tree and the heads read, so the policy network is unchanged), logvar = Linear(k -> k)(h_s);
- decoder p(s | z): `FrameDecoder`, the Nature CNN mirrored, reconstructing the whole 4-frame stack;
- loss (Kingma & Welling 2014, with Ha & Schmidhuber's choices): squared error summed over the
  pixels in [0, 1] + beta * max(KL(q || N(0, I)), free nats), beta = `BETA` = 1 and a floor of
  `FREE_NATS_PER_DIM` = 0.5 nats per latent dimension ("kl_tolerance" in their code), per sample,
  averaged over the batch; z = mu + sigma * eps sampled once (the reparameterisation trick).
"""

import torch
from torch import nn

#: The KL's weight (Ha & Schmidhuber 2018: 1, a plain ELBO).
BETA = 1.0
#: KL floor per latent dimension, in nats (Ha & Schmidhuber's kl_tolerance 0.5): below
#: FREE_NATS_PER_DIM * k per sample the KL gives no gradient.
FREE_NATS_PER_DIM = 0.5
#: Nature CNN convolutions (kernel, stride), input first; the decoder runs them backwards.
NATURE_CONVS = ((8, 4), (4, 2), (3, 1))
NATURE_CHANNELS = (32, 64, 64)


def kl_to_standard_normal(mean: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(mean, diag(exp(logvar))) || N(0, I)) per row: [B, k], [B, k] -> [B] (nats)."""
    return 0.5 * (mean.pow(2) + logvar.exp() - logvar - 1).sum(-1)


class FrameDecoder(nn.Module):
    """p(s | z): latents [B, k] -> pixel logits [B, C, H, W] (sigmoid: frames in [0, 1]).

    The Nature CNN (`xlvin.nn.encoders.NatureCNN`) mirrored: Linear(k -> 64 x 7 x 7) -> ReLU ->
    ConvT(64 -> 64, 3, stride 1) -> ReLU -> ConvT(64 -> 32, 4, stride 2) -> ReLU ->
    ConvT(32 -> C, 8, stride 4), i.e. 7 -> 9 -> 20 -> 84 on 84 x 84 frames (other sizes: each
    transposed convolution pads its output back to the size its convolution read).
    """

    def __init__(
        self, out_channels: int = 4, embedding_dim: int = 512, size: int | tuple[int, int] = 84
    ) -> None:
        super().__init__()
        sides = [(size, size) if isinstance(size, int) else tuple(size)]  # input of each conv
        for kernel, stride in NATURE_CONVS:
            sides.append(tuple((s - kernel) // stride + 1 for s in sides[-1]))
        self.feature_shape = (NATURE_CHANNELS[-1], *sides[-1])  # (64, 7, 7) on 84 x 84
        self.linear = nn.Linear(embedding_dim, NATURE_CHANNELS[-1] * sides[-1][0] * sides[-1][1])
        layers: list[nn.Module] = []
        channels_in = (out_channels, *NATURE_CHANNELS[:-1])  # what each conv read
        for i in reversed(range(len(NATURE_CONVS))):
            kernel, stride = NATURE_CONVS[i]
            padding = tuple(big - ((small - 1) * stride + kernel)
                            for big, small in zip(sides[i], sides[i + 1]))
            layers += [nn.ReLU(), nn.ConvTranspose2d(NATURE_CHANNELS[i], channels_in[i], kernel,
                                                     stride, output_padding=padding)]
        self.deconvs = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """z [B, k] -> logits [B, C, H, W]."""
        features = self.linear(z).view(-1, *self.feature_shape)  # [B, 64, 7, 7]
        return self.deconvs(features)  # [B, C, 84, 84]


class VAEWorldModel(nn.Module):
    """The VAE's parts around an encoder: the log-variance head and the decoder; `forward` is
    its loss terms on a batch of embeddings and the frames they encode."""

    def __init__(
        self, embedding_dim: int, channels: int = 4, size: int | tuple[int, int] = 84,
        beta: float = BETA, free_nats_per_dim: float = FREE_NATS_PER_DIM,
    ) -> None:
        super().__init__()
        self.beta, self.free_nats = beta, free_nats_per_dim * embedding_dim
        self.logvar = nn.Linear(embedding_dim, embedding_dim)
        self.decoder = FrameDecoder(channels, embedding_dim, size)

    def forward(
        self, mean: torch.Tensor, obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(reconstruction, beta * floored KL), each averaged over the batch, of the embeddings
        mean = h_s [B, k] of the frames obs [B, C, H, W] (uint8, or floats in [0, 255]); z is
        drawn from torch's global generator."""
        logvar = self.logvar(mean)  # [B, k]
        z = mean + torch.randn_like(mean) * (0.5 * logvar).exp()  # [B, k], reparameterised
        frames = torch.sigmoid(self.decoder(z))  # [B, C, H, W] in [0, 1]
        reconstruction = (frames - obs.float() / 255.0).pow(2).flatten(1).sum(-1)  # [B]
        kl = kl_to_standard_normal(mean, logvar).clamp(min=self.free_nats)  # [B]
        return reconstruction.mean(), self.beta * kl.mean()

    @torch.no_grad()
    def reconstruct(self, mean: torch.Tensor) -> torch.Tensor:
        """The decoder's frames at the posterior mean (no sampling): [B, k] -> [B, C, H, W] in
        [0, 1], what figure 10 shows."""
        return torch.sigmoid(self.decoder(mean))
