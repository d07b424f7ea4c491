"""The class path that camera checkpoints made before ``training/`` had packages store
(SB3 pickles ``policy_kwargs``, and with it ``training.camera_policy.CameraExtractor``):
kept so those checkpoints load, resume and export."""

from training.ppo.camera_policy import CameraExtractor

__all__ = ["CameraExtractor"]
