"""Adam with torch's arithmetic and state layout, without ``torch._dynamo``.

Every ``torch.optim.Optimizer`` imports ``torch._dynamo`` the moment it is built (its
``add_param_group`` is wrapped to disable compilation), and again on its first
``step``, ``state_dict`` and ``load_state_dict``: about a second on a 2-core machine,
a third of a run's start-up, spent on a compiler lander never uses. :class:`LeanAdam`
is what SB3 needs of an optimizer (``param_groups``, ``zero_grad``, ``step``,
``state_dict``, ``load_state_dict``) with ``torch.optim.Adam``'s update, done with
torch's multi-tensor (``_foreach``) kernels, and its ``state_dict`` in exactly Adam's
layout, so a checkpoint it writes loads into ``torch.optim.Adam`` and the other way
round (``tests/test_lean_ppo.py`` checks both, and that the updates agree).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

_ADAM_FLAGS: dict[str, Any] = {
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": None,
    "decoupled_weight_decay": False,
}
"""The rest of ``torch.optim.Adam``'s group settings, at the values LeanAdam implements."""


class UnsupportedAdamSetting(ValueError):
    """An Adam setting LeanAdam does not implement (amsgrad, maximize, ...)."""


class LeanAdam:
    """Adam (Kingma and Ba, as ``torch.optim.Adam`` computes it) for SB3's policies.

    :param params: the parameters to optimise.
    :param lr: the step size.
    :param betas: decay of the first and second moment estimates.
    :param eps: added to the denominator.
    :param weight_decay: L2 penalty added to the gradient, as ``torch.optim.Adam`` does.
    :param flags: Adam's other settings; anything but their defaults is refused.
    :raises UnsupportedAdamSetting: for a setting this class does not implement.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        **flags: Any,
    ) -> None:
        _check_flags(flags)
        self.defaults: dict[str, Any] = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            **_ADAM_FLAGS,
        }
        self.param_groups: list[dict[str, Any]] = [{**self.defaults, "params": list(params)}]
        self.state: dict[torch.Tensor, dict[str, Any]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient (to None, as torch does by default)."""
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                if set_to_none:
                    param.grad = None
                else:
                    param.grad.detach_().zero_()

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One Adam update of every parameter that has a gradient."""
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            grads = [p.grad for p in params]
            for param in params:
                if param not in self.state:
                    self.state[param] = {
                        "step": 0,
                        "exp_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(param, memory_format=torch.preserve_format),
                    }
            # Parameters at different step counts (one had no gradient before) update apart.
            by_step: dict[int, list[int]] = {}
            for index, param in enumerate(params):
                self.state[param]["step"] += 1
                by_step.setdefault(self.state[param]["step"], []).append(index)
            for step, indices in by_step.items():
                self._update(group, [params[i] for i in indices], [grads[i] for i in indices], step)
        return loss

    def _update(
        self,
        group: dict[str, Any],
        params: list[torch.Tensor],
        grads: list[Any],
        step: int,
    ) -> None:
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        exp_avgs = [self.state[p]["exp_avg"] for p in params]
        exp_avg_sqs = [self.state[p]["exp_avg_sq"] for p in params]
        if weight_decay != 0:
            grads = list(torch._foreach_add(grads, params, alpha=weight_decay))
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        step_size = lr / (1 - beta1**step)
        bias_correction2_sqrt = math.sqrt(1 - beta2**step)
        denominators = torch._foreach_sqrt(exp_avg_sqs)
        torch._foreach_div_(denominators, bias_correction2_sqrt)
        torch._foreach_add_(denominators, eps)
        torch._foreach_addcdiv_(params, exp_avgs, denominators, -step_size)

    def state_dict(self) -> dict[str, Any]:
        """The state in ``torch.optim.Adam``'s layout: parameters by index, ``step`` a
        float32 scalar tensor."""
        index_of: dict[torch.Tensor, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            packed["params"] = []
            for param in group["params"]:
                index_of.setdefault(param, len(index_of))
                packed["params"].append(index_of[param])
            groups.append(packed)
        state = {
            index_of[param]: {
                "step": torch.tensor(float(entry["step"])),
                "exp_avg": entry["exp_avg"],
                "exp_avg_sq": entry["exp_avg_sq"],
            }
            for param, entry in self.state.items()
            if param in index_of
        }
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Take a state written by :meth:`state_dict` or by ``torch.optim.Adam``.

        :param strict: accepted for SB3, which passes it to whatever is not a
            ``torch.optim.Optimizer``; the groups must match either way.

        :raises ValueError: when its groups do not match this optimizer's parameters.
        :raises UnsupportedAdamSetting: when it was written with a setting LeanAdam lacks.
        """
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups) or any(
            len(saved["params"]) != len(group["params"])
            for saved, group in zip(saved_groups, self.param_groups, strict=True)
        ):
            raise ValueError("the optimizer state has other parameter groups than this policy")
        self.state = {}
        for saved, group in zip(saved_groups, self.param_groups, strict=True):
            _check_flags({key: saved[key] for key in _ADAM_FLAGS if key in saved})
            for key, value in saved.items():
                if key != "params":
                    group[key] = tuple(value) if key == "betas" else value
            for index, param in zip(saved["params"], group["params"], strict=True):
                entry = state_dict["state"].get(index)
                if entry is None:
                    continue
                self.state[param] = {
                    "step": int(float(entry["step"])),
                    "exp_avg": entry["exp_avg"].to(param.device, param.dtype).clone(),
                    "exp_avg_sq": entry["exp_avg_sq"].to(param.device, param.dtype).clone(),
                }


def _check_flags(flags: dict[str, Any]) -> None:
    for key, value in flags.items():
        if key not in _ADAM_FLAGS:
            raise UnsupportedAdamSetting(f"LeanAdam has no setting {key!r}")
        if value and key not in ("foreach", "fused"):  # those two choose kernels only
            raise UnsupportedAdamSetting(f"LeanAdam does not implement {key}=True")
