"""Root pytest configuration: the namespace of the docstring examples in `jaxrbd/`.

Every `Example:` in the library's docstrings runs as a doctest against a tiny model
(RBDL's triple pendulum) with `jaxrbd`, `jax`, `jnp` and `np` already imported.
"""

import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def _doctest_namespace(doctest_namespace):
    import jax.numpy as jnp
    import numpy as np

    import jaxrbd

    model = jaxrbd.models.triple_pendulum()
    doctest_namespace.update(
        jax=jax,
        jnp=jnp,
        np=np,
        jaxrbd=jaxrbd,
        model=model,
        q=jaxrbd.random_configuration(model, jax.random.key(0)),
        q0=jaxrbd.random_configuration(model, jax.random.key(1)),
        q1=jaxrbd.random_configuration(model, jax.random.key(2)),
        qd=jnp.linspace(-1.0, 1.0, model.nv),
        tau=jnp.ones(model.nv),
    )
