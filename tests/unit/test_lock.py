"""The lock files (``requirements/``), the declared dependencies and the licence (issue 15):
what CI, the Docker image and the README install is pinned with hashes, within the bounds of
``pyproject.toml``; every third-party module the code imports is declared; the licence that
``pyproject.toml`` declares is in the repository."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def pins(path: Path) -> dict[str, tuple[str, int]]:
    """``name -> (version, number of hashes)`` of a pip-compile lock file."""
    text = (ROOT / path).read_text()
    out: dict[str, tuple[str, int]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        head = re.match(r"([A-Za-z0-9._-]+)==([^\s\\]+)", block)
        if head:
            out[canonicalize_name(head[1])] = (head[2], block.count("--hash=sha256:"))
    return out


def requirements(extra: str | None = None) -> list[Requirement]:
    project = PYPROJECT["project"]
    found = [Requirement(r) for r in project["dependencies"]]
    if extra:
        found += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return found + [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]


@pytest.mark.parametrize("lock,extra", [("requirements/runtime.txt", None),
                                        ("requirements/test.txt", "test")])
def test_every_dependency_is_pinned_within_its_bounds_with_hashes(lock: str,
                                                                  extra: str | None) -> None:
    pinned = pins(Path(lock))
    for requirement in requirements(extra):
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{requirement} is not in {lock}"
        version, hashes = pinned[name]
        assert requirement.specifier.contains(version, prereleases=True), \
            f"{lock} pins {name}=={version} outside {requirement}"
    assert all(hashes >= 1 for _, hashes in pinned.values())
    assert "--find-links" not in (ROOT / lock).read_text()


def test_the_test_lock_keeps_the_runtime_versions() -> None:
    runtime, test = pins(Path("requirements/runtime.txt")), pins(Path("requirements/test.txt"))
    assert {name: version for name, (version, _) in runtime.items()} == {
        name: test[name][0] for name in runtime}


def third_party_imports() -> dict[str, set[str]]:
    """Top-level modules imported by ``streams/`` and ``producers/`` that are neither the
    standard library nor gangstate: ``module -> files``."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / "streams").rglob("*.py")) + sorted(
            (ROOT / "producers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                     and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in (
                        "streams", "producers", "deploy", "__future__", "mypy"):
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared() -> None:
    """``requests`` (``streams/cli/query.py``), ``mode`` (``streams/worker/faust_patches.py``)
    and ``urllib3`` are imported directly, so they are dependencies of their own, not only
    of Faust and the kubernetes client."""
    declared = {canonicalize_name(r.name) for r in requirements()}
    distributions = importlib.metadata.packages_distributions()
    missing = {module: files for module, files in third_party_imports().items()
               if not {canonicalize_name(d) for d in distributions.get(module, [module])}
               & declared}
    assert missing == {}
    assert {"requests", "mode", "urllib3"} <= set(third_party_imports())


def test_ci_the_image_and_the_readme_install_from_the_lock() -> None:
    setup = (ROOT / ".ci" / "setup.sh").read_text()
    assert "pip install -q --require-hashes -r requirements/test.txt" in setup
    assert "--no-build-isolation -e '.[test]'" in setup
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert dockerfile.count("pip install --require-hashes -r requirements/runtime.txt") == 2
    readme = (ROOT / "README.md").read_text()
    assert "requirements/test.txt" in readme and "bash .ci/setup.sh" in readme


def test_the_declared_licence_is_shipped() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
