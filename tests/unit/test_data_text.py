"""The rule that decides when two names are the same name (:func:`kifqa.data.text.fold`)."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from kifqa.data.text import _WHOLE_LETTERS, article_split, fold


def _rule(text: str) -> str:
    """What fold computes for any text: case-folded, strokes dropped, NFKD, accents dropped."""
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_WHOLE_LETTERS))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def test_names_fold_to_their_plain_lower_case_words() -> None:
    assert fold("Sasha VUJAČIĆ") == "sasha vujacic"
    assert fold("Half-Life 2: Episode ONE") == "half-life 2: episode one"
    assert fold("Łódź, Jørn, Fırat Þorgilsson") == "lodz, jorn, firat thorgilsson"  # no accents to drop: own letters


@given(st.text(alphabet=st.characters(max_codepoint=127)) | st.text())
def test_ascii_and_other_texts_fold_by_the_same_rule(text: str) -> None:
    assert fold(text) == _rule(text)


def test_a_name_splits_into_its_article_and_the_rest() -> None:
    assert article_split("The Suicide Club") == ("the", "suicide club")
    assert article_split("An Affair") == ("an", "affair")
    assert article_split("Suicide Club") == ("", "suicide club")
    assert article_split("The") == ("", "the")
