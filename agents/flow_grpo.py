"""Moved to :mod:`agents.training.flow_grpo`: this alias keeps old imports and pickles working."""

import sys

from agents.training import flow_grpo as _moved

sys.modules[__name__] = _moved
