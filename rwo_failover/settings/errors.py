"""The one error of the settings layer."""


class ConfigError(ValueError):
    """A setting with a value we refuse; the message names the variable."""
