"""The kernel trainer's compute is one seam: only ``kernels/compute.py`` calls the numba cores,
only ``kernels/threads.py`` sets thread counts, and the trainer reaches stored rows and kernel
operations through ``KernelCompute`` (read from the sources, as the collectives test does)."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ppack"


def modules_importing(name):
    """Paths (relative to ppack/) of the modules that import ``name`` (a ppack submodule, dotted)."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        package = ["ppack", *rel.parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                targets = [target] + [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            if f"ppack.{name}" in targets:
                found.append(str(rel))
    return sorted(set(found))


def calls_of(attribute):
    """Paths of the modules that call ``<anything>.attribute(...)`` or ``attribute(...)``."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
                if name == attribute:
                    found.append(str(path.relative_to(PACKAGE)))
    return sorted(set(found))


def test_only_the_seam_calls_the_numba_cores():
    assert modules_importing("kernels.cpu") == ["kernels/compute.py"]


def test_only_the_cores_and_the_seam_read_the_formulas():
    assert set(modules_importing("kernels.formulas")) <= {"kernels/cpu.py"}


def test_thread_counts_are_set_in_one_place():
    assert calls_of("set_num_threads") == ["kernels/threads.py"]
    assert calls_of("threadpool_limits") == ["kernels/threads.py"]


def test_the_trainer_stores_rows_only_through_the_seam():
    """StoredRows is built by KernelCompute alone; the table and the trainer hand rows to it."""
    assert calls_of("StoredRows") == ["kernels/compute.py"]
    assert modules_importing("kernels.stored.StoredRows") == ["kernels/compute.py"]
