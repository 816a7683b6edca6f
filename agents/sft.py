"""Moved to :mod:`agents.training.sft`: this alias keeps old imports and pickles working."""

import sys

from agents.training import sft as _moved

sys.modules[__name__] = _moved
