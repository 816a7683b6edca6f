"""Moved to :mod:`agents.policies.baselines`: this alias keeps old imports and pickles working."""

import sys

from agents.policies import baselines as _moved

sys.modules[__name__] = _moved
