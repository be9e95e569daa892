"""Policy documents: the reference component with a declarative document
packed into its slot (docs/policy-documents.md).

    import yaml  # PyYAML: YAML is read here, the component reads JSON
    from agent_recovery import Policy
    from agent_recovery.document import pack_document

    doc = yaml.safe_load(open("policy.yaml"))
    policy = Policy.load(pack_document(doc))
    run_smoke_tests(policy)  # agent_recovery.verify: a bad document fails here, its path named

The component validates the document (at its first call) and applies it;
this module only writes its JSON text into the slot of a copy of the
reference component, as the Rust and Node hosts do.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Union

from .errors import PolicyRuntimeError
from .policy import Source, read_source

#: The 32 bytes that open the reference component's document slot.
SLOT_MARKER = b"agent-recovery/policy-document/1"
#: The slot's size in bytes: marker, little-endian u32 length, document text.
SLOT_BYTES = 16 * 1024

__all__ = ["SLOT_BYTES", "SLOT_MARKER", "pack_document"]


def _bad(message: str) -> PolicyRuntimeError:
    return PolicyRuntimeError("invalid_argument", message)


def pack_document(
    document: Union[Mapping[str, Any], str], component: Optional[Source] = None
) -> bytes:
    """A copy of the reference component (or `component`, which must have an
    empty slot) with `document` (a mapping, or JSON text) packed into its slot.

    Load the result with `Policy.load(...)` and hot-swap it like any component.
    Raises `PolicyRuntimeError` (`invalid_argument`) when the document is not
    JSON or does not fit, or the component has no empty slot.
    """
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError as e:
            raise _bad(f"the policy document is not JSON ({e}); pass a mapping or JSON text") from None
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    data = text.encode("utf-8")
    wasm = bytearray(read_source(component))
    room = SLOT_BYTES - len(SLOT_MARKER) - 4
    if len(data) > room:
        raise _bad(
            f"the policy document is {len(data)} bytes as JSON, more than the {room} its "
            "slot holds; shorten its hints and causes"
        )
    at = wasm.find(SLOT_MARKER)
    if at < 0 or wasm.find(SLOT_MARKER, at + 1) >= 0:
        raise _bad(
            "the component does not have exactly one policy document slot; "
            "pack into the reference component"
        )
    start = at + len(SLOT_MARKER)
    if any(wasm[start : start + 4 + room]):
        raise _bad(
            "the component already holds a policy document; pack into the reference component"
        )
    wasm[start : start + 4] = len(data).to_bytes(4, "little")
    wasm[start + 4 : start + 4 + len(data)] = data
    return bytes(wasm)
