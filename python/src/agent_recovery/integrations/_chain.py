"""A chain of models behind one `recover` door: the part the model wrappers share."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple, TypeVar

M = TypeVar("M")

#: The door options a model chain sets itself.
FIXED = ("call", "target", "fallbacks")


def chain(who: str, first: str, named: Iterable[Tuple[str, M]], options: Dict[str, Any]) -> Tuple[Dict[str, M], Dict[str, Any]]:
    """The models by a unique name (a repeated name gets `#2`, `#3`, ...) and
    the door's options: `call="llm"`, `target` the first model, `fallbacks`
    the others in order, `tool` and `step_id` `"model_request"` unless given.
    `options` naming `call`, `target` or `fallbacks` is refused (`TypeError`):
    `who` sets them, from its `first` argument and `fallbacks=[...]`."""
    for fixed in FIXED:
        if fixed in options:
            raise TypeError(f"{who} sets {fixed!r} itself; pass the models as {first} and fallbacks=[...]")
    models: Dict[str, M] = {}
    for base, model in named:
        name, n = base, 1
        while name in models:
            n += 1
            name = f"{base}#{n}"
        models[name] = model
    names = list(models)
    door = {"tool": "model_request", "step_id": "model_request", **options,
            "call": "llm", "target": names[0], "fallbacks": names[1:]}
    return models, door
