"""What `load_mjcf` checks before and while MuJoCo compiles: text or path, the files an MJCF
model may read (``allow_external_files=False``), explicit masses MuJoCo would zero, and
MuJoCo's own compiler warnings relayed as Python warnings."""

from __future__ import annotations

import contextlib
import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np

from ._source import is_xml_text, strip_bom

__all__ = ["check_files", "check_spec_masses", "relay_mujoco_warnings", "source_text"]

def source_text(src) -> tuple[str, bool]:
    """``(text or path, is_xml)`` of a `str`, `bytes` or `os.PathLike` source.

    A string is XML when its first character after a byte-order mark and blanks is ``<``;
    bytes are always XML and must be UTF-8 (a BOM is allowed).
    """
    if isinstance(src, (bytes, bytearray)):
        try:
            text = bytes(src).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"load_mjcf: the MJCF bytes are not UTF-8 text (byte {e.start}: "
                f"{bytes(src)[e.start:e.start + 1]!r}); MJCF files are UTF-8"
            ) from None
        return text, True
    if isinstance(src, str):
        return (strip_bom(src).lstrip(), True) if is_xml_text(src) else (src, False)
    if isinstance(src, os.PathLike):
        return os.fspath(src), False
    raise TypeError(
        f"load_mjcf: expected a path, MJCF text, an MjSpec or an MjModel, got {type(src).__name__}"
    )


# ---------------------------------------------------------------- files an MJCF model reads

#: Compiler attributes that prefix the paths of assets (MuJoCo's ``assetdir`` sets the
#: mesh, texture and height-field folders at once).
_DIRS = {"mesh": ("meshdir", "assetdir"), "skin": ("meshdir", "assetdir"),
         "texture": ("texturedir", "assetdir"), "hfield": ("assetdir",)}


def _parse(text: str, what: str) -> ET.Element:
    try:
        return ET.fromstring(text)
    except ET.ParseError as e:
        raise ValueError(f"load_mjcf: {what} is not well-formed XML: {e}") from None


def _inside(path: str, folder: str) -> bool:
    real, base = os.path.realpath(path), os.path.realpath(folder)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def check_files(text: str | None, path: str | None, assets: dict | None) -> None:
    """Refuse any file an MJCF model would read outside its own folder.

    ``<include file>`` and every ``file*`` attribute of an asset (meshes, textures,
    height fields, skins, nested models), joined to the ``<compiler>`` folders
    (``meshdir``, ``texturedir``, ``assetdir``), must resolve (symbolic links followed)
    inside the folder of the model file; included files are checked the same way before
    MuJoCo reads them. For MJCF text there is no folder: only names given in ``assets``
    are allowed. Raises `ValueError` naming the element and the path.
    """
    folder = os.path.dirname(os.path.abspath(path)) if path is not None else None
    given = set(assets or {})
    seen: set[str] = set()

    def allowed(name: str) -> bool:
        if name in given:
            return True
        if folder is None or os.path.isabs(name):
            return folder is not None and _inside(name, folder)
        return _inside(os.path.join(folder, name), folder)

    def refuse(tag, attr, value, where):
        scope = (f"outside the model's folder {folder!r}" if folder is not None
                 else "from MJCF text (only names given in `assets` may be read)")
        raise ValueError(
            f"load_mjcf(allow_external_files=False): <{tag} {attr}={value!r}> in {where} "
            f"would read a file {scope}; pass allow_external_files=True for a trusted model"
        )

    def scan(root: ET.Element, where: str, dirs: dict[str, str]) -> None:
        for el in root.iter("compiler"):
            dirs.update({k: el.get(k) for k in ("meshdir", "texturedir", "assetdir") if el.get(k)})
        for el in root.iter():
            tag = el.tag if isinstance(el.tag, str) else ""
            for attr, value in el.attrib.items():
                if not attr.startswith("file"):
                    continue
                if tag == "include":
                    full = value
                else:
                    prefix = next((dirs[k] for k in _DIRS.get(tag, ("assetdir",)) if k in dirs), "")
                    full = os.path.join(prefix, value) if prefix and not os.path.isabs(value) else value
                if not (allowed(full) or value in given):
                    refuse(tag, attr, value, where)
                if tag == "include" and value in given and value not in seen:
                    seen.add(value)  # an included file given as an asset is checked too
                    content, _ = source_text(bytes(assets[value]))
                    scan(_parse(content, repr(value)), repr(value), dirs)
                elif tag == "include" and folder is not None:
                    target = os.path.realpath(os.path.join(folder, value))
                    if target not in seen and os.path.isfile(target):
                        seen.add(target)
                        with open(target, encoding="utf-8", errors="replace") as f:
                            scan(_parse(f.read(), repr(value)), repr(value), dirs)

    if text is None:
        with open(path, "rb") as f:
            text, _ = source_text(f.read())
    scan(_parse(text, "the MJCF model" if path is None else repr(path)),
         "the MJCF text" if path is None else repr(path), {})


# ---------------------------------------------------------------- the spec before compiling


def check_spec_masses(spec) -> None:
    """Refuse explicit ``<inertial>`` masses and moments that are negative or not finite.

    MuJoCo's compiler refuses them on moving bodies but sets a body without joints to zero
    mass without a word; a model whose file says otherwise is refused here, the body named.
    """
    for body in spec.bodies:
        if not body.explicitinertial:
            continue
        mass = float(body.mass)
        full = np.asarray(body.fullinertia, dtype=np.float64)
        diag = np.asarray(body.inertia, dtype=np.float64)
        what = f"MJCF body {body.name or '(unnamed)'!r}"
        if not np.isfinite(mass) or mass < 0:
            raise ValueError(f"{what}: <inertial mass={mass!r}> must be finite and >= 0")
        moments = diag if np.isnan(full[0]) else full
        if not np.all(np.isfinite(moments)):
            raise ValueError(f"{what}: <inertial> moments {moments.tolist()} must be finite")
        if np.isnan(full[0]) and np.any(diag < 0):
            raise ValueError(f"{what}: <inertial diaginertia={diag.tolist()}> must be >= 0")


@contextlib.contextmanager
def relay_mujoco_warnings(mujoco, stacklevel: int):
    """Relay MuJoCo's console warnings (``mju_warning``) while compiling as Python
    ``UserWarning``s ("MuJoCo: ..."), then restore the previous handler."""
    caught: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(caught.append)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)
        for msg in dict.fromkeys(caught):  # the parse and the compile may say the same
            warnings.warn(f"MuJoCo: {msg.strip()}", UserWarning, stacklevel=stacklevel)
