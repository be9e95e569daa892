"""Agent frameworks' exceptions as `exception` observations (see `_exception_obs`).

An exception defined by an agent framework (PydanticAI, the OpenAI Agents
SDK, LangChain / LangGraph, LiteLLM), and any `BaseExceptionGroup`, is
described as itself: its type and message, the HTTP status, headers and body
it carries, the framework's retry verdict, and the observations of its
`__cause__` (else of its `__context__`: frameworks re-raise inside `except`
blocks; e.g. the provider SDK's status error, read by that SDK's adapter) and
of a group's members. The SDK exceptions these frameworks wrap are read
by their own adapters, in `adapters`.

Recognised by the top-level module of the class, like every adapter: no
framework is imported.
"""

from __future__ import annotations

from typing import Optional

from ._exception_obs import Nested, enrich, safe_message
from .observe import qualified_name
from .types import Observation

__all__ = ["FRAMEWORK_ROOTS", "framework_observation"]

#: Top-level modules of the frameworks read here.
FRAMEWORK_ROOTS = frozenset(
    {"pydantic_ai", "agents", "langchain", "langchain_core", "langchain_openai", "langchain_anthropic",
     "langgraph", "litellm"}
)


def framework_observation(
    exc: BaseException, root: str, depth: int, above: frozenset[int], nested: Nested
) -> Optional[Observation]:
    """The `exception` observation of a framework's exception or an exception
    group, else None (another adapter reads it)."""
    if root not in FRAMEWORK_ROOTS and not isinstance(exc, BaseExceptionGroup):
        return None
    obs: Observation = {"source": "exception", "type": qualified_name(exc), "message": safe_message(exc)}
    enrich(obs, exc, depth, above, nested, context=True)
    if root == "litellm":
        # LiteLLM names the provider it called (`openai`, `anthropic`, ...).
        provider = getattr(exc, "llm_provider", None)
        if isinstance(provider, str) and provider:
            obs["provider"] = provider
    return obs
