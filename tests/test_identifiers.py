"""Each identifier has one canonical form, whoever makes it: the format a source publishes accepts it,
the repair rebuilds it from a tolerant spelling of an argument, and the reader finds it in a sentence.

Identifiers and their spellings are generated (numbers, letters, case, separators, padding zeros);
the canonical form each is checked against is written out here, independently of
``sources.identifiers``. A number 0 is left out: the repair pads it (``CUST-00000``) but the reader
reads no id in it.
"""

from __future__ import annotations

import re
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.planning.reading import read_query
from sources import formats
from sources.formats import Format
from subagents.repair import repair

SETTINGS = settings(max_examples=150, deadline=None)
SEPARATORS = st.sampled_from(["-", "_", " ", ""])
PADDING = st.sampled_from(["", " ", "  ", "\t"])


@st.composite
def any_case(draw: st.DrawFn, text: str) -> str:
    flips = draw(st.lists(st.booleans(), min_size=len(text), max_size=len(text)))
    return "".join(char.upper() if flip else char.lower() for char, flip in zip(text, flips, strict=True))


def published(form: Format, value: str) -> bool:
    return re.fullmatch(form.pattern, value) is not None and len(value) <= form.max_length


def repaired(name: str, value: str) -> Any:
    arguments = {name: value}
    return (repair(arguments) or arguments)[name]


def read(text: str, kind: Any) -> list[Any]:
    # An amount in another currency is set aside after the identifiers are read, so a generated one
    # holding such text ("sku 4417 usd", "KB-1EUR", "1usd@a.io") is read whole.
    return read_query(text).values(kind)


NUMBERED = [
    pytest.param("CUST", formats.CUSTOMER_ID, "customer_id", "customer", 1, id="customer"),
    pytest.param("ORD", formats.ORDER_ID, "order_id", "order", 1000, id="order"),
]


@pytest.mark.parametrize(("prefix", "form", "kind", "noun", "least"), NUMBERED)
@SETTINGS
@given(data=st.data(), number=st.integers(1, 99_999), zeros=st.integers(0, 6))
def test_a_numbered_id_has_one_canonical_form(
    prefix: str, form: Format, kind: str, noun: str, least: int, data: st.DataObject, number: int, zeros: int
) -> None:
    canonical = f"{prefix}-{number:05d}"
    spelled = data.draw(any_case(prefix)) + data.draw(SEPARATORS) + "0" * zeros + str(number)
    padded = data.draw(PADDING) + spelled + data.draw(PADDING)

    assert published(form, canonical)
    assert repaired(kind, padded) == canonical
    assert read(f"tell me about {spelled} please", kind) == [canonical]
    if number >= least:  # "order 12" is a count; an order number alone takes four digits or more
        after_noun = data.draw(st.sampled_from(["{} {}", "{} #{}", "{} no. {}", "{} number {}", "{} id {}"]))
        assert read(f"tell me about {after_noun.format(noun, number)}", kind) == [canonical]


@SETTINGS
@given(
    data=st.data(),
    digits=st.integers(0, 9999).map("{:04d}".format),
    letters=st.text(string.ascii_letters, min_size=3, max_size=3),
)
def test_a_sku_has_one_canonical_form(data: st.DataObject, digits: str, letters: str) -> None:
    canonical = f"SKU-{digits}-{letters.upper()}"
    spelled = data.draw(any_case("SKU")) + data.draw(SEPARATORS) + digits + data.draw(SEPARATORS) + letters

    assert published(formats.SKU, canonical)
    assert repaired("sku", data.draw(PADDING) + spelled + data.draw(PADDING)) == canonical
    assert read(f"orders with {spelled} in them", "sku") == [canonical]


@SETTINGS
@given(
    data=st.data(),
    words=st.lists(
        st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=8), min_size=1, max_size=3
    ),
)
def test_an_article_id_has_one_canonical_form(data: st.DataObject, words: list[str]) -> None:
    canonical = "KB-" + "-".join(words)
    cased = [data.draw(any_case(word)) for word in words]
    joined = cased[0] + "".join(data.draw(st.sampled_from("-_")) + word for word in cased[1:])
    # An argument known to be an article id may be spelled loosely ("kb refunds"); in a sentence only
    # the hyphenated form is one, in any case: "kb refunds" there is words to search for.
    loosely = data.draw(any_case("KB")) + data.draw(SEPARATORS) + joined
    in_a_sentence = data.draw(any_case("KB")) + "-" + "-".join(cased)

    assert published(formats.ARTICLE_ID, canonical)
    assert repaired("article_id", data.draw(PADDING) + loosely + data.draw(PADDING)) == canonical
    assert read(f"what does {in_a_sentence} say", "article_id") == [canonical]


LOCAL = st.text(string.ascii_lowercase + string.digits + "._%+-", min_size=1, max_size=12)
LABEL = st.text(string.ascii_lowercase + string.digits + "-", min_size=1, max_size=8)
TOP = st.text(string.ascii_lowercase, min_size=2, max_size=5)


@SETTINGS
@given(data=st.data(), local=LOCAL, labels=st.lists(LABEL, min_size=1, max_size=3), top=TOP)
def test_an_email_has_one_canonical_form(
    data: st.DataObject, local: str, labels: list[str], top: str
) -> None:
    canonical = f"{local}@{'.'.join(labels)}.{top}"
    written = data.draw(any_case(canonical))

    assert published(formats.CUSTOMER_IDENTIFIER, canonical)
    assert repaired("identifier", data.draw(PADDING) + written + data.draw(PADDING)) == canonical
    assert read(f"investigate {written} please", "email") == [canonical]


@pytest.mark.parametrize(
    ("name", "written", "canonical"),
    [
        ("customer_id", "cust 42", "CUST-00042"),
        ("order_id", " ord_0010023 ", "ORD-10023"),
        ("sku", "sku4417blk", "SKU-4417-BLK"),
        ("article_id", "kb damaged_items", "KB-DAMAGED-ITEMS"),
        ("identifier", " Jane.Doe@Example.com ", "jane.doe@example.com"),
        ("identifier", "Cust-42", "CUST-00042"),
    ],
)
def test_examples_of_repaired_spellings(name: str, written: str, canonical: str) -> None:
    assert repaired(name, written) == canonical
