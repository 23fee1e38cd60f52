"""The accelerators of the PPO update (the fused loss node, the flat Adam) against the readable
PPO loss and torch.optim.Adam."""

import pytest
import torch

from xlvin.accel.flat_adam import FlatAdam
from xlvin.accel.fused_ppo_loss import fused_ppo_loss
from xlvin.nn.ppo_loss import ppo_loss

LIMIT = 20.0


def minibatch(seed: int, n: int = 256, num_actions: int = 3):
    """Data that visits every branch: ratios inside and outside the clip range on both sides,
    log-ratios beyond the limit, zero advantages (surrogate ties), clipped and unclipped values,
    values equal to the old values."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, num_actions, generator=g) * 2
    actions = torch.randint(0, num_actions, (n,), generator=g)
    logp = torch.log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    shift = torch.randn(n, generator=g) * 0.3
    shift[:8] = 0.0  # ratio exactly 1
    shift[8:16] = 30.0  # log-ratio clamped at -20
    shift[16:24] = -30.0  # and at +20
    old_logprobs = logp + shift
    adv = torch.randn(n, generator=g)
    adv[24:40] = 0.0
    values = torch.randn(n, generator=g)
    old_values = values + torch.randn(n, generator=g) * 0.3
    old_values[40:48] = values[40:48]
    returns = torch.randn(n, generator=g)
    return logits, values, actions, old_logprobs, adv, returns, old_values


@pytest.mark.parametrize("clip_value", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fused_ppo_loss_matches_the_readable_loss(seed: int, clip_value: bool) -> None:
    logits, values, actions, old_logprobs, adv, returns, old_values = minibatch(seed)
    args = (actions, old_logprobs, adv, returns, old_values)
    consts = {"clip": 0.2, "ent_coef": 0.01, "vf_coef": 0.5, "clip_value_loss": clip_value,
              "logratio_limit": LIMIT}

    l1, v1 = logits.clone().requires_grad_(), values.clone().requires_grad_()
    expected, expected_terms = ppo_loss(l1, v1, *args, **consts)
    (3.0 * expected).backward()

    l2, v2 = logits.clone().requires_grad_(), values.clone().requires_grad_()
    loss, terms = fused_ppo_loss(l2, v2, *args, **consts)
    (3.0 * loss).backward()

    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-7)
    fields = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac")
    for name in fields:
        torch.testing.assert_close(getattr(terms, name), getattr(expected_terms, name),
                                   rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(l2.grad, l1.grad, rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(v2.grad, v1.grad, rtol=1e-5, atol=1e-8)
    # the data covers the regimes: some clipped ratios, some clamped log-ratios, some clipped values
    assert 0 < terms.clipfrac < 1
    assert (l1.grad[8:24].abs().sum(-1) > 0).any()  # entropy still flows where the ratio is clamped


@pytest.mark.parametrize("loss_fn", [ppo_loss, fused_ppo_loss])
def test_ppo_loss_gradient_is_zero_where_the_clipped_side_is_taken(loss_fn) -> None:
    """A ratio far above 1 + eps with a positive advantage: the surrogate is flat there, so only
    the entropy term moves the logits."""
    logits = torch.zeros(1, 2, requires_grad=True)
    actions = torch.zeros(1, dtype=torch.long)
    old = torch.log(torch.tensor([0.1]))  # ratio 0.5 / 0.1 = 5
    zero = torch.zeros(1)
    loss, terms = loss_fn(logits, torch.zeros(1, requires_grad=True), actions, old,
                           torch.ones(1), zero, zero, 0.2, True, 0.0, 0.5, LIMIT)
    loss.backward()
    assert terms.clipfrac == 1.0
    assert torch.equal(logits.grad, torch.zeros(1, 2))


@pytest.mark.parametrize("loss_fn", [ppo_loss, fused_ppo_loss])
def test_ppo_loss_by_hand_on_both_sides_of_both_clips(loss_fn) -> None:
    """pi = 1/2 for the action taken; pi_old 1/4, 1/4, 1, 1 and 1/2 make ratios 2, 2, 1/2, 1/2
    and 1; advantages +1, -1, -1, +1 and 2. The surrogate takes min(r A, clip(r) A): 1.2 (the
    clipped side, flat), -2, -0.8 (clipped, flat), 0.5 and 2, so the policy loss is -0.9 / 5.
    Values 1, 1, -1, -1 and 1/2 from old values 0, 0, 0, 0 and 1/2 (moved past the clip of 0.2,
    but the last) towards returns 0, 2, 0, -2 and 1/2: squared errors max((V - R)^2,
    (V_clip - R)^2) = 1, 3.24 (the clipped side, flat), 1, 3.24 and 0, a value loss of
    0.5 x 8.48 / 5."""
    logits = torch.zeros(5, 2, requires_grad=True)
    values = torch.tensor([1.0, 1.0, -1.0, -1.0, 0.5], requires_grad=True)
    old_logprobs = torch.log(torch.tensor([0.25, 0.25, 1.0, 1.0, 0.5]))
    advantages = torch.tensor([1.0, -1.0, -1.0, 1.0, 2.0])
    returns = torch.tensor([0.0, 2.0, 0.0, -2.0, 0.5])
    old_values = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.5])
    loss, terms = loss_fn(logits, values, torch.zeros(5, dtype=torch.long), old_logprobs,
                          advantages, returns, old_values, 0.2, True, 0.01, 0.5, LIMIT)
    log2 = torch.log(torch.tensor(2.0))
    torch.testing.assert_close(terms.policy_loss, torch.tensor(-0.18))
    torch.testing.assert_close(terms.value_loss, torch.tensor(0.848))
    torch.testing.assert_close(terms.clipfrac, torch.tensor(0.8))
    # (r - 1) - log r: 1 - log 2 twice, log 2 - 1/2 twice and 0
    torch.testing.assert_close(terms.approx_kl, torch.tensor(0.2))
    torch.testing.assert_close(loss, -0.18 - 0.01 * log2 + 0.5 * 0.848)
    loss.backward()
    # d(-r A / 5)/d logits = -A r (1/2, -1/2) / 5 where the unclipped side is taken, else 0
    torch.testing.assert_close(logits.grad, torch.tensor(
        [[0.0, 0.0], [0.2, -0.2], [0.0, 0.0], [-0.05, 0.05], [-0.2, 0.2]]))
    # d(0.5 x 0.5 (V - R)^2 / 5)/dV = (V - R) / 10 where the unclipped side is taken, else 0
    torch.testing.assert_close(values.grad, torch.tensor([0.1, 0.0, -0.1, 0.0, 0.0]))


def test_flat_adam_follows_torch_adam() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    twin = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 3))
    twin.load_state_dict(net.state_dict())
    flat = FlatAdam(net.parameters(), lr=1e-2, eps=1e-5)
    adam = torch.optim.Adam(twin.parameters(), lr=1e-2, eps=1e-5, fused=True)
    x = torch.randn(16, 5)
    for _ in range(20):
        flat.zero_grad()
        adam.zero_grad()
        net(x).square().mean().backward()
        twin(x).square().mean().backward()
        flat.step()
        adam.step()
    for p, q in zip(net.parameters(), twin.parameters()):
        assert p.data_ptr() != q.data_ptr()
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)  # the same kernel; rounding only
    # the parameters are views of the flat buffer, and state_dict / load_state_dict go through it
    assert net[0].weight.untyped_storage().data_ptr() == flat.flat.untyped_storage().data_ptr()
    net.load_state_dict({k: torch.zeros_like(v) for k, v in net.state_dict().items()})
    assert flat.flat.abs().sum() == 0


def test_flat_adam_rebinds_gradients_another_optimizer_cut_off() -> None:
    """Pre-training with a separate optimizer sets .grad to None (zero_grad's default); the next
    FlatAdam.zero_grad must reconnect them, or those weights silently stop training."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    flat = FlatAdam(net.parameters(), lr=0.1)
    other = torch.optim.SGD(net.parameters(), lr=0.1)
    net(torch.randn(8, 4)).sum().backward()
    other.step()
    other.zero_grad()
    assert net.weight.grad is None
    before = net.weight.detach().clone()
    flat.zero_grad()
    net(torch.randn(8, 4)).sum().backward()
    flat.step()
    assert not torch.equal(net.weight, before)


def test_flat_adam_release_leaves_each_weight_its_own_storage() -> None:
    """After training (release), every parameter is a tensor of its own, not a view into the
    flat buffer: later steps of the optimizer no longer reach it, and it computes exactly as a
    copy of the same weights loaded into a fresh module."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    flat = FlatAdam(net.parameters(), lr=0.1)
    net(torch.randn(8, 4)).sum().backward()
    flat.step()
    flat.release()
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    fresh.load_state_dict(net.state_dict())
    for p, q in zip(net.parameters(), fresh.parameters()):
        assert p.untyped_storage().data_ptr() != flat.flat.untyped_storage().data_ptr()
        assert p.grad is None and torch.equal(p, q)
    x = torch.randn(64, 4)
    assert torch.equal(net(x), fresh(x))
    before = [p.detach().clone() for p in net.parameters()]
    flat.step()
    assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before))


def test_flat_adam_clips_like_clip_grad_norm() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3))
    twin = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Linear(7, 3))
    twin.load_state_dict(net.state_dict())
    flat = FlatAdam(net.parameters(), lr=1e-3)
    x = torch.randn(32, 5) * 10
    net(x).square().sum().backward()
    twin(x).square().sum().backward()
    norm = flat.clip_grad_norm_(0.5)
    expected = torch.nn.utils.clip_grad_norm_(twin.parameters(), 0.5)
    torch.testing.assert_close(norm, expected)
    assert norm > 0.5
    for p, q in zip(net.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    torch.testing.assert_close(torch.linalg.vector_norm(flat.flat.grad), torch.tensor(0.5))


def test_flat_adam_state_round_trip_continues_identically() -> None:
    torch.manual_seed(0)
    net, twin = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    twin.load_state_dict(net.state_dict())
    a, b = FlatAdam(net.parameters(), lr=1e-2), FlatAdam(twin.parameters(), lr=1e-2)
    x = torch.randn(8, 4)

    def train(model: torch.nn.Module, opt: FlatAdam, steps: int) -> None:
        for _ in range(steps):
            opt.zero_grad()
            model(x).square().sum().backward()
            opt.step()

    train(net, a, 5)
    b.load_state_dict(a.state_dict())
    twin.load_state_dict(net.state_dict())
    train(net, a, 5)
    train(twin, b, 5)
    assert torch.equal(net.weight, twin.weight)
    with pytest.raises(ValueError, match="optimizer state for"):
        FlatAdam(torch.nn.Linear(2, 2).parameters(), lr=1e-2).load_state_dict(a.state_dict())


def test_readable_ppo_loss_by_hand() -> None:
    """Ratio 1 (pi = pi_old = 1/2), advantage 2, V = V_old = 1 and return 0:
    policy loss -2, entropy log 2, value loss 1/2 (the clipped value equals V)."""
    logits = torch.zeros(1, 2, requires_grad=True)
    values = torch.ones(1, requires_grad=True)
    half = torch.log(torch.tensor([0.5]))
    loss, terms = ppo_loss(logits, values, torch.zeros(1, dtype=torch.long), half,
                           torch.tensor([2.0]), torch.zeros(1), torch.ones(1), 0.2, True,
                           0.01, 0.5, LIMIT)
    log2 = torch.log(torch.tensor(2.0))
    torch.testing.assert_close(terms.policy_loss, torch.tensor(-2.0))
    torch.testing.assert_close(terms.entropy, log2)
    torch.testing.assert_close(terms.value_loss, torch.tensor(0.5))
    torch.testing.assert_close(loss, -2.0 - 0.01 * log2 + 0.5 * 0.5)
    loss.backward()
    # d(-A r)/d logit_a = -A (1 - pi_a) = -1; the entropy is at its maximum (zero gradient)
    torch.testing.assert_close(logits.grad, torch.tensor([[-1.0, 1.0]]))
    torch.testing.assert_close(values.grad, torch.tensor([0.5]))
