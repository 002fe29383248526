"""FusionBench backend plugin: TorchScript trace + freeze."""

__version__ = "0.1.0"
