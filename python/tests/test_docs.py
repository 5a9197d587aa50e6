"""The examples of docs/python.md: every ```python block, run in order in one namespace (as a
reader pastes them into one session), in a scratch directory for the files they write."""

import os
import re

from conftest import SOURCE_DIR

DOC = os.path.join(SOURCE_DIR, "docs", "python.md")


def python_blocks(text):
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_docs_python_blocks(tmp_path, monkeypatch):
    with open(DOC) as f:
        blocks = python_blocks(f.read())
    assert len(blocks) >= 5, "docs/python.md lost its examples"
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC} block {i + 1}", "exec"), namespace)
    assert (tmp_path / "train_trace.json").stat().st_size > 0
