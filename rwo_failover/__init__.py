"""rwo-failover: one safe pass from shutdown taint to released volume."""

__version__ = "0.1.0"
