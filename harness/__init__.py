"""FusionBench: an MLPerf-style harness that measures what kernel fusion does to vision models."""

__version__ = "0.1.0"
