"""The accuracy corpus (`tests/corpus/`) stays runnable and its cases well-formed.

The corpus measures the policy, so its figures change with it; this only checks
that every case is labelled from a cited page and that the script still drives
the SDKs end to end (on the two quickest SDKs) and reports every case.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from .conftest import repo_root

CORPUS = repo_root() / "tests" / "corpus"
CLASSES = {"transient", "permanent", "semantic", "policy", "state"}
SDKS = {"openai", "anthropic", "botocore", "google-api-core", "google-genai", "mcp", "a2a"}


def test_cases_are_labelled_from_a_cited_page() -> None:
    cases = json.loads((CORPUS / "cases.json").read_text())
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "case ids are unique"
    assert {c["sdk"] for c in cases} == SDKS, "every SDK has cases"
    for c in cases:
        assert c["expected"]["class"] in CLASSES, c["id"]
        assert isinstance(c["expected"]["retryable"], bool), c["id"]
        assert c["expected"]["retryable"] == (c["expected"]["class"] == "transient"), c["id"]
        assert c["doc"].startswith("https://") and c["says"], c["id"]
        drive = c["drive"]
        assert ("status" in drive) or drive.get("action") in ("reset", "hang", "refused") \
            or "mcp" in drive, c["id"]


def test_the_script_drives_the_sdks_and_reports_every_case(tmp_path: Path) -> None:
    out = tmp_path / "results.md"
    run = subprocess.run(
        [sys.executable, str(CORPUS / "build.py"), "--sdk", "mcp", "--sdk", "a2a", "--out", str(out),
         "--json", str(tmp_path / "records.json")],
        capture_output=True, text=True, timeout=300, check=True,
    )
    cases = [c for c in json.loads((CORPUS / "cases.json").read_text()) if c["sdk"] in ("mcp", "a2a")]
    records = json.loads((tmp_path / "records.json").read_text())
    assert [r["id"] for r in records] == [c["id"] for c in cases]
    last = run.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"corpus: {len(cases)} cases; ours: class \d+% \(\d+/{len(cases)}\), retryable \d+% "
        rf"\(\d+/{len(cases)}\); SDKs' own retry rules: \d+% \(\d+/{len(cases)}\)", last), last
    assert all(r["sdk_retry"] is False for r in records)  # neither SDK retries anything
    assert out.read_text().count("| a2a-") == sum(c["sdk"] == "a2a" for c in cases)
