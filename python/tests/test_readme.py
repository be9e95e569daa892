"""The Python blocks of the documentation run as written: the root README's
quickstart and the Runtime quickstart of python/README.md."""

from __future__ import annotations

import re

from .conftest import repo_root


def _first_block(text: str, heading: str) -> str:
    section = text[text.index(heading):]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, f"the {heading.strip()!r} section has a python block"
    return block.group(1)


def test_the_readme_quickstart_runs_as_written() -> None:
    """The operation fails once with a 503; the block asserts the retried answer."""
    text = (repo_root() / "README.md").read_text(encoding="utf-8")
    code = _first_block(text, "\n### Python\n")
    scope: dict = {}
    exec(compile(code, "README.md (Python quickstart)", "exec"), scope)
    assert scope["answer"] == "ch_1"


def test_the_runtime_quickstart_runs_as_written() -> None:
    text = (repo_root() / "python" / "README.md").read_text(encoding="utf-8")
    code = _first_block(text, "\n## Runtime\n")
    exec(compile(code, "python/README.md (Runtime quickstart)", "exec"), {})
