"""`harness_store.schema`: the names users call are importable from the package itself,
importing it (as every Store does, for detection and the release facts) loads no Alembic, and
the upgrade's lines go to the logger the migrations guide names."""

from __future__ import annotations

import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest
from support.processes import alembic_argv

import harness_store.schema as schema


@pytest.mark.parametrize("name", schema.__all__)
def test_a_public_name_is_its_module_own(name: str) -> None:
    defined_in = import_module(f".{schema.LAZY[name]}", "harness_store.schema")
    assert getattr(schema, name) is getattr(defined_in, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'upgrades'"):
        _ = schema.upgrades  # type: ignore[attr-defined]


def test_detection_and_the_release_facts_load_no_alembic() -> None:
    probe = (
        "import sys\n"
        "import harness_store.schema, harness_store.schema.detect\n"
        "from harness_store.schema import revision_for\n"
        "assert revision_for('0.40') == '0.37'\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_plain_alembic_logs_the_report_under_the_module_name(tmp_path: Path) -> None:
    done = subprocess.run(
        alembic_argv(tmp_path / "runs.sqlite3"), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "INFO  [harness_store.schema.migrate] found: empty database" in done.stderr
