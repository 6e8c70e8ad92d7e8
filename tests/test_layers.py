"""The layers of dashboard/ARCHITECTURE.md, checked on the code's own imports (every `import` and `from …
import`, at module level or inside functions): data flows one way, no app imports one above it or beside it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "dashboard"

# Lower numbers sit below; an app may import only apps of a lower rank, and the helpers beside the chain.
RANK = {
    # The admin's date formats (FORMAT_MODULE_PATH), read from dashboard/times.py like every page's.
    "formats": 0,
    "upstream": 0,
    "sources": 1,
    "deliveries": 2,
    "polling": 3,
    # The completeness audit (actions/audit.py) leaves maintenance windows out of its sample.
    "expectations": 4,
    "actions": 5,
    "web": 6,
    "alerts": 6,
    "lookups": 6,
    "devtools": 7,
    # /api/v1/: the pages' twin; reads web's forms and the streams page's rows, alerts' workflow.
    "api": 7,
}
# Beside the chain: any app may use them; they import no app.
HELPERS = {
    "accounts", "live", "env", "text", "replica", "times", "locks", "heap", "log_context", "client_address",
    "encryption", "demo_mail",
    # What the viewer sees, and the one function that narrows reads to it; the models of every app use it.
    "visibility",
}
# Top-level modules that read apps: each reads only what is named here.
READERS = {
    "health": {"sources", "locks", "replica"},
    "metrics": {"sources", "deliveries", "alerts", "celery", "client_address", "accounts", "visibility"},
}
# The wiring: settings, routes, the WSGI and Celery entry points and the launcher see everything.
WIRING = {"__init__", "settings", "urls", "wsgi", "celery", "launcher"}
# Apps that stand alone and import nothing of the project.
ALONE = {"simulator", "upstream"}


def app_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "dashboard" else None


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def edges() -> set[tuple[str, str, str]]:
    """(importing app, imported app, file) for every import of one dashboard app by another."""
    out: set[tuple[str, str, str]] = set()
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if "migrations" in rel.parts:
            continue
        source = rel.parts[0] if len(rel.parts) > 1 else path.stem
        for module in imports(path):
            target = app_of(module)
            if target is not None and target != source:
                out.add((source, target, str(rel)))
    return out


def test_no_app_imports_one_above_or_beside_it() -> None:
    wrong = []
    for source, target, where in sorted(edges()):
        if source in WIRING:
            continue
        if source in READERS:
            if target not in READERS[source]:
                wrong.append(f"{where}: {source} imports {target}")
            continue
        if target in HELPERS and source not in HELPERS:
            continue
        if source in ALONE or source in HELPERS:
            wrong.append(f"{where}: {source} imports {target}")
        elif source in RANK and target in RANK and RANK[target] >= RANK[source]:
            wrong.append(f"{where}: {source} imports {target}")
    assert wrong == []


def test_the_check_sees_the_imports_it_should() -> None:
    found = edges()
    # The premise: the reader finds real edges, function-level ones included (alerts/apps.py imports
    # polling.signals inside ready()).
    assert any(s == "alerts" and t == "polling" for s, t, _ in found)
    assert any(s == "web" and t == "actions" for s, t, _ in found)


def test_every_app_and_top_level_module_is_placed() -> None:
    apps = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in ROOT.glob("*.py")}
    assert apps | modules <= set(RANK) | HELPERS | ALONE | set(READERS) | WIRING


def test_the_check_sees_top_level_modules() -> None:
    found = edges()
    assert any(s == "health" and t == "locks" for s, t, _ in found)
    assert any(s == "polling" and t == "locks" for s, t, _ in found)
