"""Every setting of a run, declared once (``settings.py``: :class:`TrainConfig`), how a setting
is declared and bounded (``declare.py``), the checks of a whole configuration (``checks.py``),
the defaults by kind of input with their evidence (``defaults.py``), and settings read from
files and records (``files.py``). What the rest of lander uses is importable from here."""

from training.config.checks import check_bundled_game_args, check_config
from training.config.declare import (
    CAMERA_ENCODERS,
    CNN_LAYERS,
    MAX_ACTION_REPEAT,
    MAX_MEMORY,
    MAX_SPEEDUP,
    MAX_TIMESTEPS,
    STRIDED_LAYERS,
    ConfigError,
    ConvolutionLayers,
    setting,
)
from training.config.defaults import (
    CONTINUOUS_PICTURE_DEFAULTS,
    MANY_AGENT_DEFAULTS,
    PICTURE_DEFAULTS,
)
from training.config.files import (
    MAX_SETTINGS_BYTES,
    MAX_YAML_NODES,
    RECORDED_BEFORE,
    apply_overrides,
    from_dict,
    load_config_file,
    load_yaml,
    read_settings_text,
)
from training.config.settings import (
    FIELD_NAMES,
    RESUMABLE_SETTINGS,
    SESSION_SETTINGS,
    SHAPE_SETTINGS,
    TUNED,
    TrainConfig,
)

__all__ = [
    "CAMERA_ENCODERS",
    "CNN_LAYERS",
    "CONTINUOUS_PICTURE_DEFAULTS",
    "FIELD_NAMES",
    "MANY_AGENT_DEFAULTS",
    "MAX_ACTION_REPEAT",
    "MAX_MEMORY",
    "MAX_SETTINGS_BYTES",
    "MAX_SPEEDUP",
    "MAX_TIMESTEPS",
    "MAX_YAML_NODES",
    "PICTURE_DEFAULTS",
    "RECORDED_BEFORE",
    "RESUMABLE_SETTINGS",
    "SESSION_SETTINGS",
    "SHAPE_SETTINGS",
    "STRIDED_LAYERS",
    "TUNED",
    "ConfigError",
    "ConvolutionLayers",
    "TrainConfig",
    "apply_overrides",
    "check_bundled_game_args",
    "check_config",
    "from_dict",
    "load_config_file",
    "load_yaml",
    "read_settings_text",
    "setting",
]
