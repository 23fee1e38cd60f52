"""Accelerators: faster second routes to computations written readably elsewhere in the library.

The boundary rule: everything in this package is optional but the NumPy samplers, which acting
always uses (so that actions are a function of the seed whichever actor ran). Each module speeds
up one readable computation of another package (the model in `xlvin.nn`, the trainer in
`xlvin.ppo`), computes the same values up to float rounding (the samplers: the same law), and
has a test that compares it with the readable version.
The model (`xlvin.nn`) never imports from here and never knows whether it is being
accelerated; the trainer (`xlvin.ppo`) chooses an accelerator where it was measured faster
(timings in benchmarks/notes.md), under `PPOConfig.accelerate` (on by default, CPU only).

Modules:
- `numpy_actor`: a NumPy snapshot of a policy's weights for acting on CPU at small batches
  (collection and evaluation), equal to the policy's forward.
- `numpy_sampling`: actions drawn in NumPy from a distribution's parameters and its noise, with
  the law of the torch distributions of `xlvin.nn.distributions` (same probabilities; tested on
  a grid of uniforms, not draw for draw).
- `flat_adam`: Adam and gradient clipping over one flat parameter buffer, equal to
  `torch.optim.Adam` plus `clip_grad_norm_` (PPO's optimiser, and executor pre-training's).
- `fused_ppo_loss`: the PPO loss as one autograd node with its gradient in closed form, equal to
  the op-by-op loss of `xlvin.nn.ppo_loss`.
- `classic_control`: CartPole and Acrobot episodes stepped on arrays for evaluation, equal bit
  for bit to gymnasium's envs.
- `image_layout`: a minibatch's frames stored channels-last for the convolutions, equal to the
  channels-first batch up to float rounding.
- `dense_executor`: the VI executor's forward over a padded in-edge layout with its encoders
  composed into the message, equal to `VIExecutor.forward` up to float rounding (used by
  executor pre-training, `xlvin.pretrain.executor`).
- `numpy_executor`: executor pre-training's whole step (forward, MSE, backward written by hand,
  Adam) in NumPy where ReLU messages, no LayerNorm and one in-edge per node hold, equal to torch
  autograd on `VIExecutor.forward` and torch.optim.Adam up to float rounding.
- `allocator`: `retain_freed_memory()`, glibc's allocator told to keep freed memory (changes no
  value, only where big tensors come from).
"""
