"""The package's floor plan: no import cycle, coupling at one layer, every public name on a
`CoupledModel` either working or refusing with the one shared message.

The import graph is read from the source with `ast` (module-level and function-level
imports alike), so a cycle hidden in a function body counts.
"""

from __future__ import annotations

import ast
import cProfile
import functools
import inspect
import pathlib
import pstats
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrbd
from jaxrbd._coupling import UNSUPPORTED

PACKAGE = pathlib.Path(jaxrbd.__file__).parent
DATA = pathlib.Path(__file__).parent / "data"

#: third-party packages the library may import inside a function: optional extras only
OPTIONAL = {"mujoco", "viser", "trimesh", "matplotlib", "mpl_toolkits", "IPython", "pin", "ezc3d"}

#: modules allowed to test a model's kind: the definition and the dispatch floor
KIND_TESTS = {"jaxrbd._model", "jaxrbd._coupling"}


def _modules():
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name, path):
    """``(target module, line, in a function?, node)`` for each import in ``name``."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package
                    for _ in range(child.level - 1):
                        base = base.rsplit(".", 1)[0]
                    target = base + ("." + child.module if child.module else "")
                else:
                    target = child.module
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    found.append((sub if sub in MODULES else target, child.lineno, inner, child))
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    found.append((alias.name, child.lineno, inner, child))
            visit(child, inner)

    visit(tree, False)
    return found


@functools.cache
def _graph():
    return {name: {t for t, *_ in _imports(name, path) if t in MODULES and t != name}
            for name, path in MODULES.items()}


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_function_level_imports_are_optional_dependencies_and_commented():
    bad = []
    for name, path in MODULES.items():
        lines = path.read_text().splitlines()
        for target, line, in_function, _ in _imports(name, path):
            if not in_function:
                continue
            top = target.split(".")[0]
            commented = "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")
            if top not in OPTIONAL or not commented:
                bad.append(f"{name}:{line} imports {target}")
    assert bad == []


def test_the_core_imports_no_algorithm():
    """`_core` is the machinery under every algorithm: besides itself it reads the joint
    kinds' table (`joints`, host-side data), `_model` (`check_model`) and `_jit` (the
    compiler options' entry, on `_core.backend`)."""
    for name in MODULES:
        if name.startswith("jaxrbd._core"):
            above = {t for t in _graph()[name] if not t.startswith("jaxrbd._core")}
            assert above <= {"jaxrbd._jit", "jaxrbd._model", "jaxrbd.joints"}, (name, above)


@pytest.mark.parametrize("kernel", ["jaxrbd._aba", "jaxrbd._rnea", "jaxrbd._crba"])
def test_kernels_import_nothing_above_the_core(kernel):
    above = {t for t in _graph()[kernel] if not t.startswith("jaxrbd._core")}
    # the kernels' own helpers: the floating-base shortcut and one state's dense dynamics
    # (which reads the CRBA and RNEA kernels, the same floor)
    assert above <= {"jaxrbd._aba_root", "jaxrbd._dense_dynamics", "jaxrbd.joints"}, above


def test_the_coupling_data_imports_no_algorithm():
    # `_body`: host-side data of the bottom floor (`mass_matrix_bound`, for `couple`'s check)
    assert _graph()["jaxrbd._coupling"] <= {"jaxrbd._model", "jaxrbd._body"}


def test_model_kind_tested_in_one_floor():
    bad = []
    for name, path in MODULES.items():
        text = path.read_text()
        if "importlib" in text:
            bad.append(f"{name} uses importlib")
        # a duck-typed test (``getattr(model, "base", model)``) is a kind test too
        kind = r"\bis_coupled\(|isinstance\([^)]*CoupledModel|getattr\(\w+, .base."
        if name not in KIND_TESTS and re.search(kind, text):
            bad.append(f"{name} tests the model's kind")
    assert bad == []


def test_no_private_names_across_modules():
    """A module imports another module's public names (or the module), never its private
    ``_name`` helpers: a helper two modules share is named, in the module it belongs to."""
    bad = []
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            base = package
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            base += "." + node.module if node.module else ""
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{base}.{alias.name}" not in MODULES:
                    bad.append(f"{name}:{node.lineno} imports {base}.{alias.name}")
    assert bad == []


# ---------------------------------------------------------------- every public name


@pytest.fixture(scope="module")
def cm():
    return jaxrbd.load_urdf(DATA / "gripper_mimic.urdf")


@pytest.fixture(scope="module")
def values(cm):
    return _arguments(cm)


def _arguments(cm):
    """Values of the public functions' arguments, by name, for ``cm``."""
    q = jaxrbd.neutral_configuration(cm) + 0.1
    v = jnp.linspace(0.1, 0.3, cm.nv)
    body = cm.body_names[-1]
    cs = jaxrbd.ConstraintSet.contacts_3d([(body, [0.0, 0.0, 0.0])])
    return {
        "model": cm, "q": q, "q0": q, "q1": q + 0.05, "q_guess": q,
        "qd": v, "qd0": v, "qd_minus": v, "qd_guess": v, "v": v,
        "qdd": v, "qdd_desired": v, "tau": v,
        "dt": 1e-3, "key": jax.random.PRNGKey(0), "body": body,
        "constraints": cs, "prescribed": (cm.joint_names[0],),
        "tau_seq": jnp.zeros((3, cm.nv)),
        "targets": jaxrbd.IKTarget(body, position=jnp.zeros(3)),
        "markers": jaxrbd.MarkerSet(("m0",), (body,), jnp.asarray([[0.0, 0.0, 0.1]])),
        "pi": np.asarray(jaxrbd.inertial_parameters(cm.base)),
        "fn": lambda m: jaxrbd.total_mass(m), "elements": (),
        "contacts": jaxrbd.ground.ContactPoints.create(cm, [(body, [0.0, 0.0, 0.0], 0.0)]),
        "terrain": jaxrbd.ground.Plane(-1.0),
    }


def _public():
    out = [(name, getattr(jaxrbd, name)) for name in dir(jaxrbd)]
    out += [(f"ground.{name}", getattr(jaxrbd.ground, name)) for name in jaxrbd.ground.__all__]
    keep = []
    for name, fn in out:
        if name.split(".")[-1].startswith("_") or inspect.isclass(fn) or not callable(fn):
            continue
        params = list(inspect.signature(fn).parameters)
        if "model" in params and name != "couple":  # couple: tested below
            keep.append(name)
    return keep


PUBLIC = _public()


def _lookup(name):
    obj = jaxrbd
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def test_the_public_names_are_found():
    assert {"forward_dynamics", "inverse_kinematics", "ground.step", "rollout"} <= set(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_on_a_coupled_model(values, name):
    """Each public function of a model traces on a `CoupledModel` (`jax.eval_shape`:
    no compile; the coupled values are tested against the full tree in `test_robots`,
    `test_rotors`, `test_urdf`) or raises the one shared error."""
    if name == "actuation":
        pytest.skip("needs an MJCF Actuators set: test_mjcf_actuation compares the coupled "
                    "actuation with MuJoCo")
    fn = _lookup(name)
    params = inspect.signature(fn).parameters.values()
    args = [values[p.name] for p in params
            if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    try:
        jax.eval_shape(lambda: fn(*args))
    except ValueError as e:
        short = name.split(".")[-1]
        assert str(e) == UNSUPPORTED.format(name=short), str(e)


def test_couple_takes_a_plain_model(cm):
    with pytest.raises(TypeError, match="couple expects a plain Model"):
        jaxrbd.couple(cm, {})


def test_unsupported_is_one_message(cm):
    with pytest.raises(ValueError, match="not supported for coupled models"):
        jaxrbd.inverse_kinematics(
            cm, jnp.zeros(cm.nq), jaxrbd.IKTarget(cm.body_names[-1], position=jnp.zeros(3)))


# ---------------------------------------------------------------- one checked entry


def _calls(fn, names):
    """How often tracing ``fn`` (no compile) calls each function in ``names``
    (``{name: file suffix}``), from `cProfile`'s call counts."""
    profile = cProfile.Profile()
    profile.enable()
    jax.make_jaxpr(fn)()
    profile.disable()
    out = dict.fromkeys(names, 0)
    for (file, _, func), (_, ncalls, *_) in pstats.Stats(profile).stats.items():
        if func in names and file.endswith(names[func]):
            out[func] += ncalls
    return out


@pytest.mark.parametrize("kind", ["plain", "coupled"])
@pytest.mark.parametrize("what", ["ground_hard", "ground_compliant", "step_rk4", "step_euler"])
def test_a_time_step_checks_once(cm, kind, what):
    """A time step checks its state once at its door and asks the model's kind once
    (`jaxrbd._api.kernels`): the parts inside are kernels, not public doors."""
    model = cm if kind == "coupled" else jaxrbd.models.triple_pendulum()
    q, v = jaxrbd.neutral_configuration(model), jnp.full(model.nv, 0.1)
    body = model.body_names[-1]
    pts = jaxrbd.ground.ContactPoints.create(model, [(body, [0.0, 0.0, 0.0], 0.01)])
    fn = {
        "ground_hard": lambda: jaxrbd.ground.step(model, q, v, v, 1e-3, pts,
                                                  jaxrbd.ground.Plane(-1.0), "hard"),
        "ground_compliant": lambda: jaxrbd.ground.step(model, q, v, v, 1e-3, pts,
                                                       jaxrbd.ground.Plane(-1.0), "compliant"),
        "step_rk4": lambda: jaxrbd.step(model, q, v, v, 1e-3, "rk4"),
        "step_euler": lambda: jaxrbd.step(model, q, v, v, 1e-3, "semi_implicit_euler"),
    }[what]
    calls = _calls(fn, {"check_state": "checks.py", "public": "_coupling.py"})
    assert calls == {"check_state": 1, "public": 1}, calls
