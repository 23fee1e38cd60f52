"""The channels-last accelerator (`xlvin.accel.image_layout`): the same values as the readable
channels-first batch, up to float rounding, through a pixel agent's forward, TransE term and
gradients."""

import pytest
import torch

from xlvin.accel.image_layout import channels_last
from xlvin.nn.executor import MessagePassing
from xlvin.nn.policy import TransitionBatch
from xlvin.run.config import RunConfig, TrainConfig
from xlvin.run.architecture import agent_of
from xlvin.envs.spaces import Spaces

FRAMES = Spaces((4, 36, 36), "image", 3)


def _frames(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 256, (n, *FRAMES.obs_shape), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(seed))


def test_only_the_memory_order_of_image_batches_changes() -> None:
    images = TransitionBatch(_frames(5, 0), torch.zeros(5, dtype=torch.long), _frames(5, 1))
    fast = channels_last(images)
    assert fast.obs.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(fast.obs, images.obs) and torch.equal(fast.next_obs, images.next_obs)
    vectors = TransitionBatch(torch.randn(5, 4), torch.zeros(5, dtype=torch.long), torch.randn(5, 4))
    assert channels_last(vectors).obs is vectors.obs
    grids = TransitionBatch(torch.rand(5, 3, 8, 8), torch.zeros(5, dtype=torch.long), torch.rand(5, 3, 8, 8))
    assert channels_last(grids).obs is grids.obs  # maze grids (floats) are left as they are


@pytest.mark.parametrize("agent", ["ppo", "xlvin"])
def test_a_pixel_agent_computes_the_same_on_channels_last_frames(agent: str) -> None:
    torch.manual_seed(0)
    cfg = RunConfig(train=TrainConfig(env="xlvin/FreewayTrain-v4", agent=agent, depth=2,
                                      ppo_transe=agent == "ppo"))
    policy = agent_of(cfg, FRAMES, MessagePassing(50, "max") if agent == "xlvin" else None)
    batch = TransitionBatch(_frames(16, 0), torch.randint(0, 3, (16,)), _frames(16, 1))
    results = []
    for layout in (lambda b: b, channels_last):
        policy.zero_grad()
        logits, values, aux = policy.forward_with_aux(layout(batch))
        (logits.square().sum() + values.sum() + sum(aux.values())).backward()
        results.append((logits.detach(), values.detach(), [t.detach() for t in aux.values()],
                        [p.grad.clone() for p in policy.parameters() if p.grad is not None]))
    (logits, values, aux, grads), (fast_logits, fast_values, fast_aux, fast_grads) = results
    torch.testing.assert_close(fast_logits, logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast_values, values, rtol=1e-5, atol=1e-5)
    for fast, readable in zip(fast_aux, aux, strict=True):
        torch.testing.assert_close(fast, readable, rtol=1e-4, atol=1e-6)
    assert len(grads) == len(fast_grads) > 0
    for fast, readable in zip(fast_grads, grads, strict=True):
        torch.testing.assert_close(fast, readable, rtol=1e-4, atol=1e-5)
