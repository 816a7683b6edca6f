"""Moved to :mod:`agents.training.backends`: this alias keeps old imports and pickles working."""

import sys

from agents.training import backends as _moved

sys.modules[__name__] = _moved
