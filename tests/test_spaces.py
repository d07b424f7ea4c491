"""env_info parsing and the action/observation codecs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymnasium import spaces

from game_bridge.codecs import ActionCodec, ObservationCodec
from game_bridge.errors import ProtocolViolation
from game_bridge.protocol import encode_json
from game_bridge.spaces import parse_env_info

PER_AGENT = {
    "type": "env_info",
    "observation_space": [{"obs": {"size": [7], "space": "box"}}] * 2,
    "action_space": [{"thrust": {"size": 2, "action_type": "continuous"}}] * 2,
    "n_agents": 2,
    "agent_policy_names": ["shared_policy", "shared_policy"],
}


def test_per_agent_list_form() -> None:
    info = parse_env_info(PER_AGENT)
    assert info.n_agents == 2
    assert info.observation_space == spaces.Box(-1, 1, (7,), np.float32)
    assert info.action_space == spaces.Box(-1, 1, (2,), np.float32)
    assert info.policy_names == ("shared_policy", "shared_policy")


def test_single_dict_form_and_missing_policy_names_mean_shared() -> None:
    message = {
        "type": "env_info",
        "observation_space": {"obs": {"size": [3.0], "space": "box"}},
        "action_space": {"move": {"size": 4.0, "action_type": "discrete"}},
        "n_agents": 3.0,
    }
    info = parse_env_info(message)
    assert info.n_agents == 3
    assert info.policy_names == ("shared_policy",) * 3
    assert info.action_space == spaces.Discrete(4)


def test_mixed_action_dict_keeps_declared_order() -> None:
    message = {
        "type": "env_info",
        "observation_space": {"obs": {"size": [2], "space": "box"}},
        "action_space": {
            "zeta": {"size": 2, "action_type": "continuous"},
            "alpha": {"size": 3, "action_type": "discrete"},
        },
        "n_agents": 1,
    }
    info = parse_env_info(message)
    assert [a.key for a in info.actions] == ["zeta", "alpha"]
    codec = ActionCodec(info.actions)
    assert codec.space == spaces.Box(-1, 1, (5,), np.float32)
    encoded = codec.encode(np.array([[0.25, -2.0, 0.1, 0.9, 0.3]], dtype=np.float32))
    on_the_wire = encode_json(encoded)
    assert json.loads(on_the_wire) == [{"zeta": [0.25, -1.0], "alpha": 1}]
    assert on_the_wire.index(b'"zeta"') < on_the_wire.index(b'"alpha"')


def test_several_discrete_keys_become_multidiscrete() -> None:
    message = {
        "type": "env_info",
        "observation_space": {"obs": {"size": [2], "space": "box"}},
        "action_space": {
            "b": {"size": 2, "action_type": "discrete"},
            "a": {"size": 5, "action_type": "discrete"},
        },
        "n_agents": 2,
    }
    codec = ActionCodec(parse_env_info(message).actions)
    assert codec.space == spaces.MultiDiscrete([2, 5])
    assert codec.encode(np.array([[1, 4], [0, 2]])) == [{"b": 1, "a": 4}, {"b": 0, "a": 2}]


def test_dict_observations_keep_declared_order_and_decode_images() -> None:
    message = {
        "type": "env_info",
        "observation_space": {
            "pos": {"size": [2], "space": "box"},
            "camera_2d": {"size": [2, 2, 1], "space": "box"},
        },
        "action_space": {"a": {"size": 1, "action_type": "continuous"}},
        "n_agents": 1,
    }
    info = parse_env_info(message)
    assert isinstance(info.observation_space, spaces.Dict)
    assert list(info.observation_space.spaces) == ["pos", "camera_2d"]
    decoded = ObservationCodec(info.observations).decode(
        [{"pos": [0.5, 1.0], "camera_2d": "00ff10ab"}], 1, 0
    )
    assert decoded["camera_2d"].dtype == np.uint8
    assert decoded["camera_2d"].reshape(-1).tolist() == [0, 255, 16, 171]


@pytest.mark.parametrize(
    "broken",
    [
        {"type": "reset"},
        {**PER_AGENT, "n_agents": 3},
        {**PER_AGENT, "action_space": [{"thrust": {"size": 2, "action_type": "sideways"}}] * 2},
        {**PER_AGENT, "observation_space": [{"obs": {"size": [-1], "space": "box"}}] * 2},
        {**PER_AGENT, "agent_policy_names": ["only_one"]},
        {
            **PER_AGENT,
            "action_space": [
                {"a": {"size": 1, "action_type": "continuous"}},
                {"b": {"size": 1, "action_type": "continuous"}},
            ],
        },
    ],
)
def test_inconsistent_env_info_is_a_protocol_violation(broken: dict) -> None:
    with pytest.raises(ProtocolViolation):
        parse_env_info(broken, instance=4)


def test_observation_of_wrong_agent_count_names_the_instance() -> None:
    codec = ObservationCodec(parse_env_info(PER_AGENT).observations)
    with pytest.raises(
        ProtocolViolation, match="game instance 5: expected observations for 2 agents, got 1"
    ):
        codec.decode([{"obs": [0.0] * 7}], 2, 5)


def _with_bounds(size: list[int], **bounds: object) -> dict:
    return {
        **PER_AGENT,
        "observation_space": {"obs": {"size": size, "space": "box", **bounds}},
        "action_space": {"thrust": {"size": 2, "action_type": "continuous"}},
    }


def test_bounds_per_dimension_null_and_beyond_float32_are_read() -> None:
    info = parse_env_info(
        _with_bounds([4], low=[-1.5, None, 0, -1e39], high=[1.5, None, 3.4e38, 2])
    )
    space = info.observation_space
    assert isinstance(space, spaces.Box)
    assert space.low.tolist() == [-1.5, -np.inf, 0.0, -np.inf]
    assert space.high[[0, 1, 3]].tolist() == [1.5, np.inf, 2.0]
    assert space.high[2] == np.float32(3.4e38)


def test_bounds_nested_as_the_shape_and_a_single_null_cover_every_value() -> None:
    grid = parse_env_info(_with_bounds([2, 2], low=[[0, 1], [2, 3]], high=10)).observation_space
    assert isinstance(grid, spaces.Box)
    assert grid.low.tolist() == [[0, 1], [2, 3]] and grid.high.tolist() == [[10, 10], [10, 10]]
    free = parse_env_info(_with_bounds([3], low=None, high=None)).observation_space
    assert isinstance(free, spaces.Box)
    assert np.isinf(free.low).all() and np.isinf(free.high).all()


@pytest.mark.parametrize(
    ("bounds", "said"),
    [
        ({"low": [0, 0, 5], "high": [1, 1, 1]}, "low 5 above high 1 (value 2)"),
        ({"low": 2, "high": 1}, "low 2 above high 1 (value 0 and 2 more)"),
        ({"low": "minus one"}, "low bound must be a number or null, got 'minus one'"),
        ({"high": [1, True, 1]}, "high bound must be a number or null, got True"),
        ({"low": [0, 0]}, "declares 2 low bounds for 3 values"),
        ({"high": {"x": 1}}, "high bound must be a number or null"),
    ],
)
def test_bad_bounds_are_a_named_protocol_violation(bounds: dict, said: str) -> None:
    with pytest.raises(ProtocolViolation) as raised:
        parse_env_info(_with_bounds([3], **bounds), instance=1)
    assert str(raised.value).startswith("game instance 1: observation 'obs' ")
    assert said in str(raised.value) and "\n" not in str(raised.value)
