"""The closed-form PPO loss node and the flat Adam against their plain PyTorch definitions."""

import pytest
import torch

from xlvin.train.optim import FlatAdam
from xlvin.train.ppo_loss import ppo_loss

LIMIT = 20.0


def reference(logits, values, actions, old_logprobs, adv, returns, old_values, clip, clip_value,
              ent_coef, vf_coef):
    """The PPO loss written op by op with autograd (the formula ppo_loss must reproduce)."""
    logp = torch.log_softmax(logits, dim=-1)
    new_logprobs = logp.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1).mean()
    logratio = (new_logprobs - old_logprobs).clamp(-LIMIT, LIMIT)
    ratio = logratio.exp()
    policy_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
    if clip_value:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        value_loss = 0.5 * torch.max((values - returns) ** 2, (clipped - returns) ** 2).mean()
    else:
        value_loss = 0.5 * ((values - returns) ** 2).mean()
    approx_kl = ((ratio - 1) - logratio).mean()
    clipfrac = ((ratio - 1).abs() > clip).float().mean()
    loss = policy_loss - ent_coef * entropy + vf_coef * value_loss
    return loss, (policy_loss, value_loss, entropy, approx_kl, clipfrac)


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
def test_ppo_loss_matches_autograd_formula(seed: int, clip_value: bool) -> None:
    logits, values, actions, old_logprobs, adv, returns, old_values = minibatch(seed)
    args = (actions, old_logprobs, adv, returns, old_values)
    consts = {"clip": 0.2, "ent_coef": 0.01, "vf_coef": 0.5}

    l1, v1 = logits.clone().requires_grad_(), values.clone().requires_grad_()
    expected, expected_terms = reference(l1, v1, *args, clip_value=clip_value, **consts)
    (3.0 * expected).backward()

    l2, v2 = logits.clone().requires_grad_(), values.clone().requires_grad_()
    loss, terms = ppo_loss(l2, v2, *args, clip_value_loss=clip_value, logratio_limit=LIMIT,
                           **consts)
    (3.0 * loss).backward()

    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-7)
    got = (terms.policy_loss, terms.value_loss, terms.entropy, terms.approx_kl, terms.clipfrac)
    for a, b in zip(got, expected_terms):
        torch.testing.assert_close(a, b.detach(), rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(l2.grad, l1.grad, rtol=1e-5, atol=1e-8)
    torch.testing.assert_close(v2.grad, v1.grad, rtol=1e-5, atol=1e-8)
    # the data covers the regimes: some clipped ratios, some clamped log-ratios, some clipped values
    assert 0 < terms.clipfrac < 1
    assert (l1.grad[8:24].abs().sum(-1) > 0).any()  # entropy still flows where the ratio is clamped


def test_ppo_loss_gradient_is_zero_where_the_clipped_side_is_taken() -> None:
    """A ratio far above 1 + eps with a positive advantage: the surrogate is flat there, so only
    the entropy term moves the logits."""
    logits = torch.zeros(1, 2, requires_grad=True)
    actions = torch.zeros(1, dtype=torch.long)
    old = torch.log(torch.tensor([0.1]))  # ratio 0.5 / 0.1 = 5
    zero = torch.zeros(1)
    loss, terms = ppo_loss(logits, torch.zeros(1, requires_grad=True), actions, old,
                           torch.ones(1), zero, zero, 0.2, True, 0.0, 0.5, LIMIT)
    loss.backward()
    assert terms.clipfrac == 1.0
    assert torch.equal(logits.grad, torch.zeros(1, 2))


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
