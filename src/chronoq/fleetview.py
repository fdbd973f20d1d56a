"""Deprecated: the fleet's views are `chronoq.fleet.view`."""

import warnings

from chronoq.fleet.view import *  # noqa: F403 - the old module's names, unchanged
from chronoq.fleet.view import __all__ as __all__

warnings.warn(
    "chronoq.fleetview is deprecated; import chronoq.fleet.view instead",
    DeprecationWarning,
    stacklevel=2,
)
