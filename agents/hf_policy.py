"""Moved to :mod:`agents.policies.hf_policy`: this alias keeps old imports and pickles working."""

import sys

from agents.policies import hf_policy as _moved

sys.modules[__name__] = _moved
