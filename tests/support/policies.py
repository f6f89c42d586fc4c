"""Run policies the Store tests record: a layered one with rules in two layers, and the
permissive one (every act allowed, no layers)."""

from __future__ import annotations

from typing import Any

LAYERED_POLICY: dict[str, Any] = {
    "layers": [
        {"name": "base", "rules": [{"act": "write", "effect": "deny", "pattern": "secrets/*"}]},
        {
            "name": "task",
            "rules": [
                {"act": "write", "effect": "deny", "pattern": "vendor/**"},
                {"act": "exec", "effect": "allow", "pattern": "cargo"},
            ],
        },
    ],
    "defaults": {"read": "allow", "write": "ask", "exec": "ask", "net": "deny"},
}
PERMISSIVE_POLICY: dict[str, Any] = {
    "layers": [],
    "defaults": {"read": "allow", "write": "allow", "exec": "allow", "net": "allow"},
}
