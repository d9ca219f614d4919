"""Step 1: the model drafts the question as triple patterns with one unknown."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from kifqa.data.pool import Example
from kifqa.data.text import name_key, question_key
from kifqa.examples.text import before_comma, ngrams, spans, within
from kifqa.kb.base import KnowledgeBase
from kifqa.llm.base import ChatRequest, Message
from kifqa.pipeline.context import Context, StepError
from kifqa.types import UNKNOWN, Convention, ErrorKind, Pattern

#: Characters a predicate may use (the grammar and the parser agree on them).
_PREDICATE = r"[^|()\n?]{1,48}"
#: A forward draft's fixed end, ``?x)``, is not generated: the model stops at this text (three
#: decode steps fewer) and :func:`complete` writes the end back.
STOP = " | ?"
_FORWARD_END = " | ?x)"
#: The tokens a draft may take (a draft cut there is not completed).
MAX_TOKENS = 64
_SYSTEM = resources.files("kifqa.pipeline").joinpath("prompts/draft_system.txt").read_text().strip()


class DraftError(ValueError):
    """The model's draft is not a valid pattern list; ``output`` and ``examples`` are what the model wrote and
    was shown, for the trace (empty where the draft was not the model's)."""

    def __init__(self, message: str, *, output: str = "", examples: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.output = output
        self.examples = examples


@dataclass(frozen=True)
class Drafted:
    """Step 1's result: the draft's text and its patterns (the first the main one), its known entity regrounded
    where the settings say so (``regrounded``: the name it had before), and the examples it was drafted from."""

    output: str
    patterns: tuple[Pattern, ...]
    examples: tuple[str, ...] = ()
    #: The drafted known entity where :func:`widened` or :func:`qualified` replaced it, and which of the two did.
    regrounded: tuple[str, str] | None = None
    #: Whether the draft was given (the oracle draft), not the model's.
    given: bool = False

    @property
    def main(self) -> Pattern:
        return self.patterns[0]


async def first(ctx: Context, *, oracle: str | None = None) -> Drafted:
    """Step 1 for the question's first draft: the ``oracle`` draft where one is given, else the model's."""
    if oracle is not None:
        return await regrounded(ctx, oracle, given=True)
    return await step(ctx)


async def step(ctx: Context, *, known: list[str] | None = None) -> Drafted:
    """Step 1: the model's draft of the question (its known entity one of ``known``, default any run of the
    question's words), parsed and regrounded (:func:`regrounded`)."""
    shots = ctx.examples.select(ctx.question)
    out = await ctx.recorder.generate(ctx.llm, request(
        ctx.question, shots, constrain=ctx.settings.constrain_draft, known=known,
        prefix_key=ctx.examples.prefix_key(ctx.question), shared=ctx.examples.shared(ctx.question)))
    if out.error:
        raise StepError(f"model call failed: {out.error}", kind=ErrorKind.MODEL)
    text, examples = complete(out.text, completion_tokens=out.usage.completion_tokens), tuple(e.question for e in shots)
    try:
        return await regrounded(ctx, text, examples=examples)
    except DraftError as err:
        raise DraftError(str(err), output=text, examples=examples) from None


async def regrounded(ctx: Context, text: str, *, examples: tuple[str, ...] = (), given: bool = False) -> Drafted:
    """The patterns of draft ``text``, the known entity replaced by the longer name in the question that holds it
    (:attr:`~kifqa.config.PipelineSettings.widen_known`, :func:`widened`) or else by the name it qualifies after a
    comma (:attr:`~kifqa.config.PipelineSettings.comma_known`, :func:`qualified`, where the pool bears the
    convention out: :attr:`~kifqa.types.Convention.COMMA`)."""
    s, patterns = ctx.settings, parse(text)
    known = patterns[0].known
    if s.widen_known and (wider := await widened(ctx.kb, ctx.question, known)):
        return Drafted(text, (patterns[0].with_known(wider), *patterns[1:]), examples, ("widened", known), given)
    if s.comma_known and ctx.follows(Convention.COMMA) and (head := await qualified(ctx.kb, ctx.question, known)):
        return Drafted(text, (patterns[0].with_known(head), *patterns[1:]), examples, ("qualified", known), given)
    return Drafted(text, tuple(patterns), examples, None, given)


def grammar(question: str, known: list[str] | None = None) -> str:
    """GBNF for the draft of ``question``: one main pattern with exactly one ``?x``, which a
    backward pattern may follow with a constraint ``(?x | predicate | entity)`` (a forward one ends
    at :data:`STOP`), and known entities that are ``known`` (runs of the question that the label
    index links, :func:`grounded`) or else runs of the question's own words, in any letter case (the
    draft cannot name what the question does not)."""
    grams = known or ngrams(question)
    alternatives = " | ".join(_any_case(g) for g in grams) if grams else '"?"'
    return "\n".join([
        'root ::= "(" known " | " pred " | ?x)" | backward ( "\\n" constraint )?',
        'backward ::= "(?x | " pred " | " known ")"',
        'constraint ::= "(?x | " pred " | " known ")"',
        f"pred ::= {_PREDICATE}",
        f"known ::= {alternatives}",
    ])


def _any_case(text: str) -> str:
    """A GBNF sequence matching ``text`` in any letter case (the model may capitalise names)."""
    return "(" + " ".join(map(_any_case_char, text)) + ")"


@functools.lru_cache(maxsize=4096)
def _any_case_char(ch: str) -> str:
    """The GBNF of one character in either case (a grammar spells every character of every word run)."""
    up, low = ch.upper(), ch.lower()
    return f"[{low}{up}]" if len(up) == len(low) == 1 and up != low else json.dumps(ch, ensure_ascii=False)


async def grounded(kb: KnowledgeBase, question: str) -> list[str] | None:
    """The runs of ``question``'s words, as written with their punctuation, that are exactly an item's label or
    alias in ``kb`` (the known entities a second draft admits); ``None`` when none is, or when the base cannot
    tell."""
    return await kb.named(spans(question)) or None


def elsewhere(runs: list[str], known: str, *, exact: bool) -> list[str]:
    """The ``runs`` that are not part of ``known``'s words (``known`` respelled stays, unless it named an item
    ``exact``-ly as drafted); when every run is, those shorter than ``known``."""
    key = question_key(known)
    keys = [question_key(r) for r in runs]
    outside = [r for r, k in zip(runs, keys) if not within(k, key) or (not exact and k == key)]
    return outside or [r for r, k in zip(runs, keys) if k != key]


async def widened(kb: KnowledgeBase, question: str, known: str) -> str | None:
    """The longest run of ``question``'s words, as written, that holds all of ``known``'s words and more and
    is exactly an item's label or alias in ``kb`` (``iran`` in "the anglo-soviet invasion of iran"); ``None``
    when no such run is, or when the base cannot tell."""
    inner, name = question_key(known), name_key(known)
    wider = [r for r in spans(question) if within(inner, question_key(r)) and name_key(r) not in (name, "")]
    return await _longest_named(kb, wider) if name else None


async def qualified(kb: KnowledgeBase, question: str, known: str) -> str | None:
    """The longest run of ``question``'s words, as written, that ends at a comma right before ``known`` and is
    exactly an item's label or alias in ``kb`` ("new bedford" for ``massachusetts`` in "born in new bedford,
    massachusetts"): what ``known`` qualifies, a town its state, a person their title. ``None`` when no such run is,
    or when the base cannot tell. A dataset's convention, not one of questions ("in titanic, who played rose"):
    the draft follows it only where the example pool bears it out (:attr:`~kifqa.types.Convention.COMMA`)."""
    return await _longest_named(kb, before_comma(question, known))


async def _longest_named(kb: KnowledgeBase, runs: list[str]) -> str | None:
    """The longest of ``runs`` that is exactly an item's label or alias in ``kb`` (one query, none for no runs);
    ``None`` when none is, or when the base cannot tell."""
    found = await kb.named(runs) if runs else None
    return max(found, key=lambda r: len(question_key(r))) if found else None


def request(question: str, examples: list[Example], *, constrain: bool = True, known: list[str] | None = None,
            prefix_key: str | None = None, shared: int | None = None) -> ChatRequest:
    """The draft request: the fixed system prompt (a shared, cacheable prefix), each example as a
    user turn and the assistant's draft, then the question; the grammar admits ``known`` as the known
    entity (default: every run of the question's words). ``prefix_key`` names the example block
    when other questions share it (:meth:`~kifqa.examples.sources.ExampleSource.prefix_key`), the
    first ``shared`` examples (default: all)."""
    messages = [Message("system", _SYSTEM)]
    for e in examples:
        messages += [Message("user", e.question), Message("assistant", e.draft)]
    messages.append(Message("user", question))
    return ChatRequest(
        messages=tuple(messages),
        grammar=grammar(question, known) if constrain else None,
        max_tokens=MAX_TOKENS,
        stop=(STOP,),
        prefix_key=prefix_key,
        prefix_messages=None if shared is None else 1 + 2 * shared,
    )


def complete(text: str, *, completion_tokens: int = 0) -> str:
    """``text`` with the end a forward draft stopped before (``(known | predicate`` becomes
    ``(known | predicate | ?x)``); any other text, and one cut at :data:`MAX_TOKENS`, as it is."""
    body = text.strip()
    stopped = body.startswith("(") and body.count(" | ") == 1 and not body.endswith(")") and "\n" not in body
    return body + _FORWARD_END if stopped and completion_tokens < MAX_TOKENS else text


def parse(text: str) -> list[Pattern]:
    """Patterns from the model's text; the first is the main one and has exactly one ``?x``,
    the others are constraints ``(?x | p | entity)``."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        raise DraftError("the draft is empty")
    patterns = []
    for line in lines:
        pattern = Pattern.parse(line)
        if pattern is None:
            raise DraftError(f"not a pattern '(subject | predicate | object)': {line[:200]!r}")
        patterns.append(pattern)
    main, constraints = patterns[0], patterns[1:]
    unknowns = [main.subject, main.predicate, main.object].count(UNKNOWN)
    if unknowns != 1 or main.predicate == UNKNOWN:
        raise DraftError(f"the main pattern needs exactly one {UNKNOWN} as subject or object: {main}")
    for c in constraints:
        if c.subject != UNKNOWN or UNKNOWN in (c.predicate, c.object):
            raise DraftError(f"a constraint must read ({UNKNOWN} | predicate | entity): {c}")
    return patterns
