"""PayloadShape: the quick payload check agrees with `Signature.bind` on every signature."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronoq.core.validate import PayloadShape, payload_misfit
from chronoq.errors import InvalidPayload

P = inspect.Parameter
NAMES = ["a", "b", "c", "d"]
KIND_ORDER = [P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.VAR_POSITIONAL, P.KEYWORD_ONLY]


@st.composite
def signatures(draw: st.DrawFn) -> inspect.Signature:
    """Any valid signature over a few names: every kind, with and without defaults."""
    params: list[inspect.Parameter] = []
    defaulted = False
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4)):
        kind = draw(st.sampled_from(KIND_ORDER))
        if params and KIND_ORDER.index(kind) < KIND_ORDER.index(params[-1].kind):
            kind = params[-1].kind
        if kind is P.VAR_POSITIONAL and any(p.kind is P.VAR_POSITIONAL for p in params):
            kind = P.KEYWORD_ONLY
        has_default = kind is not P.VAR_POSITIONAL and draw(st.booleans())
        if kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD):
            # After one positional default, the next positional ones need a default too.
            has_default = has_default or defaulted
            defaulted = has_default
        default = 0 if has_default else P.empty
        params.append(P(name, kind, default=default))
    if draw(st.booleans()):
        params.append(P("extra", P.VAR_KEYWORD))
    return inspect.Signature(params)


payloads = st.one_of(
    st.dictionaries(st.sampled_from([*NAMES, "extra", "zz"]), st.integers(), max_size=5),
    st.lists(st.integers(), max_size=2),
    st.none(),
    st.integers(),
)


@given(signatures(), payloads)
def test_the_quick_check_agrees_with_bind(signature: inspect.Signature, payload: Any) -> None:
    shape = PayloadShape.of("task", signature)
    assert shape.misfit(payload) == payload_misfit("task", signature, payload)


def test_check_raises_naming_the_gap() -> None:
    def handler(a: int, *, b: int = 0) -> None: ...

    shape = PayloadShape.of("task", inspect.signature(handler))
    shape.check({"a": 1})
    shape.check({"a": 1, "b": 2})
    with pytest.raises(InvalidPayload, match=r"missing 'a'"):
        shape.check({"b": 2})
    with pytest.raises(InvalidPayload, match=r"unexpected 'c'"):
        shape.check({"a": 1, "c": 3})


def test_a_positional_only_parameter_without_default_never_fits() -> None:
    def handler(a: int, /, **rest: int) -> None: ...

    shape = PayloadShape.of("task", inspect.signature(handler))
    assert shape.misfit({"a": 1})  # `a` would land in **rest, leaving the positional unfilled
