"""Settings: the one table of settings (`table`), the parsers of its values (`values`), reading flags and the
environment through it (`load`), the checks on combinations (`checks`), token files (`tokens`) and URLs
(`urls`), the BMC map of FENCING=redfish (`bmc`), the values that switch a safety rule off (`unsafe`), and a
one-shot run's time budget (`one_shot`), which start-up and the run share.
Nothing else in rwo_failover reads the environment.

May use: the object model (names, matchers) and the standard library. Everything above it may use this package.
"""

from .bmc import Bmc, BmcMapError, bmc_for
from .errors import ConfigError
from .load import build_parser, load
from .table import BY_NAME, SPECS, Settings, Spec
from .tokens import MAX_TOKEN_BYTES, TOKEN_ALLOWED, TokenError, read_bearer_token
from .unsafe import switched_off
from .values import FENCING_MODES, LOG_FORMATS, LOG_LEVELS, OUT_OF_SERVICE_MODES, OUTPUTS, STUCK_STATES

__all__ = ["BY_NAME", "Bmc", "BmcMapError", "bmc_for", "ConfigError", "FENCING_MODES", "LOG_FORMATS", "LOG_LEVELS",
           "MAX_TOKEN_BYTES", "OUT_OF_SERVICE_MODES", "OUTPUTS", "SPECS", "STUCK_STATES", "Settings", "Spec",
           "TOKEN_ALLOWED", "TokenError", "build_parser", "load", "read_bearer_token", "switched_off"]
