"""The user guide's package map (docs/guide/developer.md) is the layer order: each module or folder of ppack imports only
those listed above it (the package's front door, __init__ and __main__, excepted), and the
map names every one of them."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ppack"
FRONT_DOOR = {"__init__", "__main__"}
MAP_PAGE = ROOT / "docs" / "guide" / "developer.md"


def layers_in_map():
    """The units (top-level modules and folders of ppack) in the order the package map lists them."""
    text = MAP_PAGE.read_text()
    block = text[text.index("```\nppack/\n"):]
    block = block[:block.index("\n```", 4)]
    return [m[1] for m in re.finditer(r"^  (\w+)(?:/|\.py)", block, re.M)]


def unit_of(module):
    """'ppack.data.shard' -> 'data'; 'ppack' -> '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_by_unit():
    """{unit: set of the other units it imports}, module-level and inside functions alike."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if parts[-1] == "__init__" else module.rsplit(".", 1)[0]
        unit = unit_of(module) if parts != ("ppack", "__init__") else "__init__"
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.ImportFrom) and node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                targets = [f"{base}.{node.module}" if node.module else f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ppack"):
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("ppack")]
            found.setdefault(unit, set()).update(unit_of(t) for t in targets if unit_of(t) != unit)
    return found


def test_every_unit_imports_only_those_above_it_in_the_map():
    order = layers_in_map()
    assert len(order) == len(set(order)), order
    rank = {unit: k for k, unit in enumerate(order)}
    graph = imports_by_unit()
    assert set(graph) | {u for deps in graph.values() for u in deps} <= set(order) | FRONT_DOOR, \
        f"units missing from the package map: {sorted(set(graph) - set(order) - FRONT_DOOR)}"
    upward = sorted((unit, dep) for unit, deps in graph.items() if unit not in FRONT_DOOR
                    for dep in deps if rank[dep] > rank[unit])
    assert upward == [], f"imports of a unit listed below the importer in the package map: {upward}"


def test_the_map_names_every_module():
    block = MAP_PAGE.read_text()
    block = block[block.index("```\nppack/\n"):]
    block = block[:block.index("\n```", 4)]
    modules = {p.stem for p in PACKAGE.rglob("*.py") if p.stem != "__init__"}
    missing = sorted(m for m in modules if not re.search(rf"\b{m}(\.py|\b)", block))
    assert missing == [], f"modules the package map does not name: {missing}"
