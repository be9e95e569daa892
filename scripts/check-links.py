#!/usr/bin/env python3
"""Check the relative links of the documentation: every `[text](target)` in
README.md, CHANGELOG.md, docs/**/*.md, node/README.md, python/README.md and the examples'
READMEs must name a file or directory of the repository, and a `#anchor` must
name a heading of the target page (GitHub's slugs). Links to http(s) and
mailto are not fetched. Prints one line per broken link and exits 1 when
there is any.

    python3 scripts/check-links.py [FILE.md ...]
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def pages() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "node" / "README.md", ROOT / "python" / "README.md"]
    found += sorted((ROOT / "docs").rglob("*.md"))
    found += sorted((ROOT / "examples").glob("*/README.md"))
    return [p for p in found if p.is_file()]


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`\n]*`", "``", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in " -_" or cat[0] in "LN":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path, cache: dict[Path, set[str]]) -> set[str]:
    if path not in cache:
        seen: dict[str, int] = {}
        names: set[str] = set()
        fenced = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                names.add(base if n == 0 else f"{base}-{n}")
        cache[path] = names
    return cache[path]


def check(page: Path, cache: dict[Path, set[str]]) -> list[str]:
    broken = []
    for m in LINK.finditer(prose(page.read_text(encoding="utf-8"))):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto: ...
        path_part, _, anchor = target.partition("#")
        dest = page if not path_part else (page.parent / path_part).resolve()
        where = f"{page.relative_to(ROOT)}: ({target})"
        if not dest.exists():
            broken.append(f"{where}: no such file {path_part}; fix the path (relative to the page)")
            continue
        if ROOT not in dest.parents and dest != ROOT:
            broken.append(f"{where}: points outside the repository; link to a file inside it")
            continue
        if anchor and dest.is_file() and dest.suffix == ".md" and anchor not in anchors(dest, cache):
            broken.append(f"{where}: no heading with the anchor #{anchor} in {dest.relative_to(ROOT)}")
    return broken


def main(argv: list[str]) -> int:
    files = [Path(a).resolve() for a in argv] or pages()
    cache: dict[Path, set[str]] = {}
    broken = [line for page in files for line in check(page, cache)]
    for line in broken:
        print(line)
    print(f"check-links: {len(files)} pages, {len(broken)} broken links", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
