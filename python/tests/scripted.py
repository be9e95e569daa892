"""The scripted model provider and payment tool (tests/frameworks/scripted_server.py), for the framework tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "frameworks"))

from scripted_server import ScriptedServer, error_body  # noqa: E402

__all__ = ["DECLINED", "ScriptedServer", "error_body", "models"]

#: Stripe's card decline (https://docs.stripe.com/api/errors: 402, type card_error, code card_declined).
DECLINED = {"status": 402, "body": {"error": {"type": "card_error", "code": "card_declined",
                                              "message": "Your card was declined."}}}


def models(stats: dict) -> dict:
    """Model requests per model name."""
    return {k[len("model:"):]: v for k, v in stats["requests"].items() if k.startswith("model:")}
