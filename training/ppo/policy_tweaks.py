"""Changes to a loaded model's exploration and optimisation, applied in place.

In place matters: replacing the ``log_std`` parameter would detach it from the
optimizer, which would then silently stop updating the standard deviation.
"""

from __future__ import annotations

import math

import torch
from stable_baselines3.common.base_class import BaseAlgorithm

from game_bridge.errors import LanderError


class PolicyTweakError(LanderError, ValueError):
    """A tweak that does not apply to this policy."""


def reset_action_std(model: BaseAlgorithm, std: float) -> None:
    """Set the policy's action standard deviation to ``std`` in every dimension.

    :raises PolicyTweakError: for a non-positive ``std`` or a policy without a
        state-independent ``log_std`` (discrete actions, gSDE).
    """
    if not std > 0:
        raise PolicyTweakError(f"--reset-std must be positive, got {std}")
    log_std = getattr(model.policy, "log_std", None)
    if not isinstance(log_std, torch.nn.Parameter) or getattr(model.policy, "use_sde", False):
        raise PolicyTweakError(
            "--reset-std needs a continuous-action policy with a Gaussian log_std; this policy has none "
            "(discrete actions): raise --ent-coef to explore more instead"
        )
    with torch.no_grad():
        log_std.fill_(math.log(std))


def action_std(model: BaseAlgorithm) -> list[float] | None:
    """The current action standard deviation per dimension, or None for discrete policies."""
    log_std = getattr(model.policy, "log_std", None)
    if not isinstance(log_std, torch.nn.Parameter):
        return None
    return [float(v) for v in torch.exp(log_std.detach()).cpu().tolist()]
