"""The check every NumPy-actor test makes: `make_actor(policy)` exists and gives the policy's
parameters and values on `obs`, up to float rounding."""

import numpy as np
import torch

from xlvin.accel.numpy_actor import make_actor


def assert_actor_matches(policy: torch.nn.Module, obs: np.ndarray, **tolerance: float) -> None:
    actor = make_actor(policy)
    assert actor is not None
    params, values = actor(obs)
    with torch.no_grad():
        ref_params, ref_values = policy(torch.from_numpy(obs))
    np.testing.assert_allclose(params, ref_params.numpy(), **tolerance)
    np.testing.assert_allclose(values, ref_values.numpy(), **tolerance)
