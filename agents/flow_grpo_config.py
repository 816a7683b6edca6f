"""Moved to :mod:`agents.training.config`: this alias keeps old imports and pickles working."""

import sys

from agents.training import config as _moved

sys.modules[__name__] = _moved
