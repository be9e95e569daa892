"""Exceptions and responses shaped like the client libraries' (no network, no deps)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class ReadTimeout(Exception):
    """Stands in for `httpx.ReadTimeout` (same qualified name)."""


ReadTimeout.__module__ = "httpx"


class FakeResponse:
    """What httpx/requests responses expose: status_code, headers, text."""

    def __init__(self, status_code: int, headers: Optional[Dict[str, str]] = None, text: str = ""):
        self.status_code = status_code
        self.headers = headers or {}
        self.text = text


class HTTPStatusError(Exception):
    """Stands in for `httpx.HTTPStatusError`: carries the response."""

    def __init__(self, response: FakeResponse) -> None:
        super().__init__(f"status {response.status_code}")
        self.response = response


HTTPStatusError.__module__ = "httpx"


class Recorder:
    """A fake sleep that records delays instead of sleeping (sync and async)."""

    def __init__(self) -> None:
        self.delays: List[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.delays.append(seconds)


def script(*steps: Any) -> Any:
    """An operation that plays `steps` in order: exceptions are raised, values returned.

    It records the keyword arguments of every attempt in `.calls`.
    """
    calls: List[Dict[str, Any]] = []

    def operation(**kwargs: Any) -> Any:
        calls.append(kwargs)
        step = steps[min(len(calls), len(steps)) - 1]
        if isinstance(step, BaseException):
            raise step
        return step

    operation.calls = calls  # type: ignore[attr-defined]
    return operation
