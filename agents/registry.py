"""Moved to :mod:`agents.policies.registry`: this alias keeps old imports and pickles working."""

import sys

from agents.policies import registry as _moved

sys.modules[__name__] = _moved
