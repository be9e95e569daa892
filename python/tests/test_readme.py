"""The Runtime quickstart of python/README.md runs as written."""

from __future__ import annotations

import re

from .conftest import repo_root


def test_the_runtime_quickstart_runs_as_written() -> None:
    text = (repo_root() / "python" / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Runtime\n"):]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the Runtime section has a python block"
    exec(compile(block.group(1), "python/README.md (Runtime quickstart)", "exec"), {})
