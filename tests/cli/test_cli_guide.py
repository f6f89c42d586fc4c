"""The command guide's Python examples run as written, in order, in a fresh directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "cli.md"
BLOCK = re.compile(r"(<!-- example: skip -->\n)?```python\n(.*?)```", re.S)


def test_the_guides_python_blocks_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    blocks = [code for skip, code in BLOCK.findall(GUIDE.read_text()) if not skip]
    assert blocks
    for code in blocks:
        exec(compile(code, str(GUIDE), "exec"), namespace)
