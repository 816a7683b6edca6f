"""The exception hierarchy of agentflow-env; every message says what to change."""

from __future__ import annotations


class AgentFlowError(Exception):
    """Base class of every error raised by agentflow-env."""


class ConfigError(AgentFlowError, ValueError):
    """A constructor argument or config value is invalid."""


class DependencyNotInstalled(AgentFlowError, ImportError):
    """An optional dependency is missing; the message names the pip command."""

    def __init__(self, package: str, extra: str):
        super().__init__(f"{package} is not installed; install it with: pip install 'agentflow-env[{extra}]'")
        self.package = package
        self.extra = extra


class DataError(AgentFlowError, ValueError):
    """A data file is missing or malformed; the message names the file and the problem."""


class IndexCorrupted(DataError):
    """A search index folder is damaged or inconsistent; the message names the folder, the file and the fix."""


class ToolError(AgentFlowError):
    """A tool could not be built or used (never raised from ``env.step``)."""


class EngineError(AgentFlowError):
    """An LLM engine failed after its retries."""


class MalformedReplyError(EngineError):
    """An LLM server answered, but its reply could not be read (not JSON, empty, cut short, no choices), and
    the retries gave none better. An eval records it as that unit's error and goes on."""
