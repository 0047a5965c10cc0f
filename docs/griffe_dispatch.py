"""A griffe extension for the API pages: a public name made in `jaxrbd._api` (from its
tables `COUPLED` and `PLAIN_ONLY`, or as ``name = dispatch(door, ...)``) is documented as
its door (the function with the signature and docstring), as `jaxrbd._coupling.dispatch`
makes it at run time."""

from __future__ import annotations

import griffe

import jaxrbd._api as tables  # the tables, read where they are defined


class DispatchedNames(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        if pkg.path != "jaxrbd":
            return
        api = pkg.members.get("_api")
        if api is None:
            return
        for table in (tables.COUPLED, tables.PLAIN_ONLY):
            for module, names in table.items():
                for name in names:
                    target = f"{module.__name__}.{name}"
                    api.set_member(name, griffe.Alias(name, target, parent=api))
        for name, member in list(api.members.items()):
            if member.is_alias:  # an import: reading its value would resolve it
                continue
            value = getattr(member, "value", None)
            if not isinstance(value, griffe.ExprCall) or str(value.function) != "dispatch":
                continue
            door = value.arguments[0]
            target = getattr(door, "canonical_path", None) or str(door)
            api.set_member(name, griffe.Alias(name, target, parent=api))
