"""The documentation (issue 6): complete API reference, valid navigation, strict build.

``mkdocs build --strict`` turns every warning into an error: broken links, nav entries
without a page, ``::: jaxrbd.name`` entries that do not resolve, and docstrings that
griffe cannot parse. The doctests of the pages run with the rest of the suite
(``--doctest-glob='*.md'`` in pyproject.toml).
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import types

import pytest

import jaxrbd

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ENTRY = re.compile(r"^:::\s+(jaxrbd(?:\.[A-Za-z_]\w*)+)\s*$", re.MULTILINE)
# public sub-namespaces whose own public names each need an entry of their own
SUBMODULES = ("batched", "spatial")


def _pages() -> dict[str, str]:
    return {str(p.relative_to(DOCS)): p.read_text() for p in sorted(DOCS.rglob("*.md"))}


def _entries() -> set[str]:
    return {m for text in _pages().values() for m in ENTRY.findall(text)}


def _nav_files(nav) -> list[str]:
    """The page paths of a mkdocs ``nav`` (nested lists of ``{title: path}``)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [f for item in nav for f in _nav_files(item)]
    if isinstance(nav, dict):
        return [f for value in nav.values() for f in _nav_files(value)]
    return []


def _exported() -> list[str]:
    """The names re-exported by ``jaxrbd/__init__.py`` (``from .x import y as y``)."""
    source = (ROOT / "jaxrbd" / "__init__.py").read_text()
    pattern = re.compile(r"^from \.[\w.]* import (\w+) as \1\b", re.MULTILINE)
    return sorted(set(pattern.findall(source)))


def test_every_public_name_is_in_the_api_reference():
    """Each name exported by ``jaxrbd/__init__.py`` (and each public function of
    ``jaxrbd.batched`` and ``jaxrbd.spatial``) has a ``::: jaxrbd.name`` entry; the other
    public modules (``joints``, ``models``) need an entry of their own or of a member."""
    entries = _entries()
    exported = _exported()
    assert "forward_dynamics" in exported and "spatial" in exported
    missing = []
    for name in exported:
        obj = getattr(jaxrbd, name)
        if isinstance(obj, types.ModuleType):
            if name in SUBMODULES:
                missing += [f"jaxrbd.{name}.{n}" for n in obj.__all__
                            if f"jaxrbd.{name}.{n}" not in entries]
            elif not any(e == f"jaxrbd.{name}" or e.startswith(f"jaxrbd.{name}.")
                         for e in entries):
                missing.append(f"jaxrbd.{name}")
        elif f"jaxrbd.{name}" not in entries:
            missing.append(f"jaxrbd.{name}")
    assert not missing, "no '::: name' entry in docs/ for: " + ", ".join(missing)


def test_api_entries_resolve():
    """Every ``::: jaxrbd.x.y`` names an existing object (mkdocs would also fail)."""
    bad = []
    for entry in sorted(_entries()):
        obj = jaxrbd
        for part in entry.split(".")[1:]:
            obj = getattr(obj, part, None)
            if obj is None:
                bad.append(entry)
                break
    assert not bad, f"unresolved API entries: {bad}"


def test_nav_matches_pages():
    """Every page in ``mkdocs.yml``'s nav exists, and every page is in the nav."""
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_files(config["nav"])
    pages = set(_pages())
    assert not [f for f in nav if f not in pages], (
        f"nav entries without a page: {[f for f in nav if f not in pages]}")
    assert not pages - set(nav), f"pages not in the nav: {sorted(pages - set(nav))}"


def test_examples_page_names_every_example():
    """docs/examples.md names each workflow script and its notebook."""
    text = (DOCS / "examples.md").read_text()
    scripts = ["elastic_arm_identification", "inertial_identification",
               "trajectory_optimization", "batched_rollouts"]
    for name in scripts:
        if (ROOT / "examples" / f"{name}.py").exists():
            assert f"examples/{name}.py" in text, name
        if (ROOT / "examples" / f"{name}.ipynb").exists():
            assert f"examples/{name}.ipynb" in text, name


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path):
    """``mkdocs build --strict`` succeeds: no warning from pages, nav or docstrings."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("mkdocstrings_handlers.python")
    pytest.importorskip("material")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
         str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    log = proc.stdout + proc.stderr
    warnings = [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line]
    assert proc.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or log.splitlines()[-30:])
    assert (tmp_path / "site" / "index.html").exists()
