"""The data types that flow through kifqa: questions, drafts, candidates, facts, answers and the trace."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import StrEnum
from typing import Any, Literal

#: The unknown of a triple pattern.
UNKNOWN = "?x"

#: ``forward``: the entity is the statement's subject; ``backward``: it is the statement's value.
Direction = Literal["forward", "backward"]


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """An entity or property found by a search, with what the LLM needs to judge it."""

    id: str
    label: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    #: Search rank score, higher is better (exact label matches score highest).
    score: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Fact:
    """One statement ``(subject, property, value)`` with labels for display."""

    subject: str
    subject_label: str
    property: str
    property_label: str
    value: str
    value_label: str
    #: ``item``, ``property``, ``iri``, ``string``, ``text``, ``quantity``, ``time`` or ``external_id``.
    value_type: str = "item"


@dataclass(frozen=True)
class Question:
    """One input question. ``error`` is set when the input row itself was unusable."""

    id: str
    text: str
    error: str | None = None


#: A pattern line as the drafts write it.
_PATTERN_LINE = re.compile(r"^\((.+?) \| (.+?) \| (.+?)\)$")


@dataclass(frozen=True)
class Pattern:
    """A triple pattern in words; exactly one of subject and object is :data:`UNKNOWN`."""

    subject: str
    predicate: str
    object: str

    @property
    def known(self) -> str:
        """The label of the known end."""
        return self.object if self.subject == UNKNOWN else self.subject

    @property
    def direction(self) -> Direction:
        """``forward`` when the known end is the subject (the unknown is the value)."""
        return "backward" if self.subject == UNKNOWN else "forward"

    def with_known(self, label: str) -> Pattern:
        """The same pattern with ``label`` at its known end."""
        if self.subject == UNKNOWN:
            return Pattern(self.subject, self.predicate, label)
        return Pattern(label, self.predicate, self.object)

    def __str__(self) -> str:
        return f"({self.subject} | {self.predicate} | {self.object})"

    @classmethod
    def parse(cls, line: str) -> Pattern | None:
        """The pattern a line ``(subject | predicate | object)`` writes (as :meth:`__str__` writes
        it), or ``None`` when the line is not one."""
        match = _PATTERN_LINE.match(line.strip())
        return None if match is None else cls(*(part.strip() for part in match.groups()))


@dataclass(frozen=True)
class ChoiceOption:
    """One numbered option of a relation choice: a triple pattern (a property of an entity, in one
    direction) and an optional gloss (the property's description)."""

    pattern: Pattern
    gloss: str = ""

    def __str__(self) -> str:
        return f"{self.pattern}{_GLOSS}{self.gloss}" if self.gloss else str(self.pattern)


#: A relation choice as :meth:`RelationChoice.__str__` writes it, and one of its option lines.
_CHOICE = re.compile(r"^Question: (?P<question>.*)\nDraft: (?P<draft>.*)\nOptions:\n(?P<options>.*)\nNumber:$", re.S)
_OPTION = re.compile(r"^(?P<number>\d+)\. (?P<option>\(.*)$")
_GLOSS = " — "


@dataclass(frozen=True)
class RelationChoice:
    """The relation step's request to the model, as its user message writes it (:meth:`__str__`)
    and a model reads it back (:meth:`parse`): the question, its draft and the numbered options;
    the answer is an option's number."""

    question: str
    draft: Pattern
    options: tuple[ChoiceOption, ...]

    def __str__(self) -> str:
        listing = "\n".join(f"{i}. {o}" for i, o in enumerate(self.options, 1))
        return f"Question: {self.question}\nDraft: {self.draft}\nOptions:\n{listing}\nNumber:"

    @classmethod
    def parse(cls, text: str) -> RelationChoice | None:
        """The choice a user message writes (as :meth:`__str__` writes it), or ``None`` when it is not one."""
        match = _CHOICE.match(text)
        draft = Pattern.parse(match.group("draft")) if match else None
        if match is None or draft is None:
            return None
        options = []
        for line in match.group("options").splitlines():
            numbered = _OPTION.match(line)
            option = _option(numbered.group("option")) if numbered else None
            if option is None:
                return None
            options.append(option)
        return cls(match.group("question"), draft, tuple(options))


def _option(text: str) -> ChoiceOption | None:
    """The option ``text`` writes: the shortest start with balanced brackets that is a pattern and is
    followed by nothing or a gloss (an entity's description may hold parentheses and dashes too)."""
    end = text.find(")")
    while end >= 0:
        head, rest = text[:end + 1], text[end + 1:]
        balanced = head.count("(") == head.count(")") and head.count("[") == head.count("]")
        pattern = Pattern.parse(head) if balanced else None
        if pattern and (not rest or rest.startswith(_GLOSS)):
            return ChoiceOption(pattern, rest[len(_GLOSS):])
        end = text.find(")", end + 1)
    return None


@dataclass(frozen=True)
class Relation:
    """A chosen (entity, property, direction): one KIF filter."""

    entity: str
    property: str
    direction: Direction


@dataclass(frozen=True, kw_only=True)
class Answer:
    """One answer statement and the id (and label) in its unknown position."""

    fact: Fact
    answer: str
    answer_label: str


@dataclass(frozen=True, kw_only=True)
class LLMCall:
    """One model call made for a question."""

    step: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    output: str = ""
    error: str | None = None
    #: The log probability the model gave its output (the sum over its tokens), and its least likely token's;
    #: ``None`` where the backend reported none.
    logprob: float | None = None
    min_logprob: float | None = None
    #: The mean over its tokens (``None`` as above): comparable between outputs of different lengths.
    mean_logprob: float | None = None


@dataclass(frozen=True, kw_only=True)
class FilterRun:
    """One KIF filter the answer step ran."""

    relation: Relation
    filter: str
    sparql: str
    n_statements: int
    seconds: float
    truncated: bool = False
    #: The batch query it was answered by, with other questions' lookups (``""``: a query of its own).
    batch: str = ""


class ErrorKind(StrEnum):
    """What went wrong with a question, set where it happened (:attr:`Trace.error_kind`)."""

    #: The input row or question text is unusable (no model or KB call was made).
    INPUT = "input"
    #: A model call failed (the backend's error, a replay-cache miss).
    MODEL = "model"
    #: The model answered, but not usably: a draft that is no pattern, a choice that is no option.
    MODEL_OUTPUT = "model_output"
    #: A knowledge-base call failed (after retries).
    KB = "kb"
    #: The search found no entity for the draft's known end.
    NO_ENTITY = "no_entity"
    #: The kept entities have no statements to choose a relation from.
    NO_STATEMENTS = "no_statements"
    #: The question took longer than ``batch.question_timeout_s``.
    TIMEOUT = "timeout"
    #: An unexpected exception (a bug).
    INTERNAL = "internal"
    #: The run has no trace of the question (an unfinished shard).
    MISSING = "missing"


class ConstraintResult(StrEnum):
    """How a constraint pattern of the draft ended (:class:`ConstraintOutcome`)."""

    #: Some answers meet it; only those were kept.
    APPLIED = "applied"
    #: No answer meets it; it was not applied.
    UNMET = "unmet"
    #: No entity is named as its entity; it was not applied.
    UNRESOLVED = "unresolved"


@dataclass(frozen=True, kw_only=True)
class ConstraintOutcome:
    """One constraint pattern of the draft and what it did to the answers (``kept`` of ``of``)."""

    constraint: Pattern
    result: ConstraintResult
    kept: int
    of: int
    #: The relations an applied constraint kept the answers by (each ``(answer, property, entity)``, read
    #: backward from its entity): the answers are the values of any of them.
    relations: tuple[Relation, ...] = ()

    def __str__(self) -> str:
        if self.result is ConstraintResult.UNRESOLVED:
            return f"constraint {self.constraint}: no entity named {self.constraint.object!r}; not applied"
        if self.result is ConstraintResult.UNMET:
            return f"constraint {self.constraint}: no answer meets it; not applied"
        return f"constraint {self.constraint}: kept {self.kept} of {self.of} answers"


#: Characters of one model output or error text a trace keeps; the rest is cut, and the cut says so.
TRACE_TEXT_CHARS = 8192


def clipped(text: str, limit: int = TRACE_TEXT_CHARS) -> str:
    """``text`` as a trace keeps it: whole up to ``limit`` characters, else its first ``limit`` and a note
    of how much was cut (a hostile server's answer must not bloat every trace)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [cut: {len(text) - limit:,} more characters]"


class Rule(StrEnum):
    """A rule of the pipeline that can change a question's outcome (:class:`Decision`)."""

    #: The draft's known entity widened to a longer name of the question that holds it.
    WIDENED = "widened"
    #: The draft's known entity replaced by the name it qualifies after a comma.
    QUALIFIED = "qualified"
    #: A second draft tried, taken or refused (its reason among the inputs).
    REDRAFT = "redraft"
    #: The precedent votes took another option over the one the draft's predicate names exactly.
    OVERRULED = "overruled"
    #: The ranking's first option taken without asking the model (the only one, the only exactly named one, or
    #: far enough ahead).
    OBVIOUS = "obvious"
    #: A kind drafted as the known entity made the constraint of a second draft.
    KIND = "kind"
    #: A constraint pattern of the draft narrowed the answers (or was not applied).
    CONSTRAINT = "constraint"
    #: Namesakes sharing the chosen option told apart by the article the question writes before their name.
    ARTICLE = "article"
    #: The known entity found with a handle's trailing digits dropped, its words written without their spaces.
    HANDLE = "handle"


class Convention(StrEnum):
    """A dataset convention a rule is written for: the rule fires only where the example pool bears it out
    (:mod:`kifqa.examples.priors`), and its :class:`Decision` names it."""

    #: The name before a comma is the topic, the one after it qualifies it ("born in new bedford, massachusetts"):
    #: ``pipeline.comma_known`` (:func:`~kifqa.pipeline.draft.qualified`).
    COMMA = "comma"
    #: A name next to an "or" is an answer to choose, not the topic ("is X male or female"): second drafts over
    #: another name (``pipeline.redraft_offered``, :func:`~kifqa.examples.text.offered`).
    OFFERED = "offered"
    #: The article written before a name is the one the name takes ("the suicide club" for The Suicide Club):
    #: namesakes told apart by it (:func:`~kifqa.pipeline.relations.agreeing`).
    ARTICLE = "article"
    #: Digits that end a word of letters are a handle's ("honeycone1969" for Honey Cone): dropped before a name
    #: written without its spaces is cut (:func:`~kifqa.pipeline.entities.unjoined`).
    HANDLE = "handle"


#: What a rule weighed: a score, a share of votes, a threshold, a count, a name.
Input = float | int | str | bool | None


@dataclass(frozen=True, kw_only=True)
class Decision:
    """A rule that fired for a question: what it weighed and whether it changed the outcome."""

    rule: Rule
    #: The step it fired in.
    step: str
    #: Whether it changed the outcome (a second draft taken, an option overruled); ``False``: it fired and left the
    #: outcome as it was.
    taken: bool
    inputs: dict[str, Input] = field(default_factory=dict)
    #: The relations it put in place and those it put aside, where it chose between relations: what the evaluation
    #: tells its help or harm from.
    chosen: tuple[Relation, ...] = ()
    instead: tuple[Relation, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TriedDraft:
    """One draft tried for a question, the first and each second draft, and how far it got."""

    draft: tuple[Pattern, ...] = ()
    #: The entities its known entity found and kept.
    entities: tuple[str, ...] = ()
    #: The score of its best relation option; ``None`` where it has none.
    best_option: float | None = None
    #: Whether the answers come from it.
    taken: bool = False
    #: Why it went no further than its draft (the model call failed, the draft is not a pattern list).
    error: str | None = None
    #: Whether the draft was given (the oracle draft) rather than the model's.
    oracle: bool = False


@dataclass
class Trace:
    """Everything that explains one question's answer (or why it has none)."""

    question_id: str
    question: str
    kb: str = ""
    model: str = ""
    draft_output: str = ""
    draft: list[Pattern] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    #: The example pool the examples were drawn from: its name and content hash (:mod:`kifqa.examples.pool`).
    pool: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    options: list[Relation] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    filters: list[FilterRun] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: list[LLMCall] = field(default_factory=list)
    kb_calls: int = 0
    n_answers: int = 0
    error: str | None = None
    error_step: str | None = None
    #: What kind of error ``error`` is (``None`` without an error, or in a trace written before kinds).
    error_kind: ErrorKind | None = None
    #: The outcome of each constraint pattern of the draft, in draft order.
    constraints: list[ConstraintOutcome] = field(default_factory=list)
    #: The drafts tried, in order: the first, then any second ones (:mod:`kifqa.pipeline.redraft`).
    attempts: list[TriedDraft] = field(default_factory=list)
    #: Every rule that fired, in the order the steps ran.
    decisions: list[Decision] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = _plain(self)
        data["error_kind"] = None if self.error_kind is None else self.error_kind.value
        data["constraints"] = [{**c, "result": c["result"].value} for c in data["constraints"]]
        data["decisions"] = [{**d, "rule": d["rule"].value} for d in data["decisions"]]
        return data

    def fail(self, kind: ErrorKind, error: str, *, step: str) -> None:
        """Records that the question failed in ``step`` with an error of ``kind`` (:func:`clipped`)."""
        self.error, self.error_kind, self.error_step = clipped(error), kind, step

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trace:
        """The trace of a :meth:`to_dict` (or its JSON); unknown keys are ignored, missing or null ones take
        their defaults (``""`` for the question's id and text)."""
        nested: dict[str, Callable[[dict[str, Any]], Any]] = {
            "draft": lambda d: Pattern(**_fields(Pattern, d)),
            "candidates": lambda d: Candidate(**{**_fields(Candidate, d), "aliases": tuple(d.get("aliases") or ())}),
            "options": lambda d: Relation(**_fields(Relation, d)),
            "relations": lambda d: Relation(**_fields(Relation, d)),
            "filters": lambda d: FilterRun(**{**_fields(FilterRun, d), "relation": Relation(**d["relation"])}),
            "llm_calls": lambda d: LLMCall(**_fields(LLMCall, d)),
            "constraints": lambda d: ConstraintOutcome(**{**_fields(ConstraintOutcome, d),
                                                         "constraint": Pattern(**d["constraint"]),
                                                         "relations": tuple(Relation(**r)
                                                                            for r in d.get("relations") or ()),
                                                         "result": ConstraintResult(d["result"])}),
            "attempts": lambda d: TriedDraft(**{**_fields(TriedDraft, d),
                                                "draft": tuple(Pattern(**p) for p in d.get("draft") or ()),
                                                "entities": tuple(d.get("entities") or ())}),
            "decisions": lambda d: Decision(**{**_fields(Decision, d), "rule": Rule(d["rule"]),
                                               "inputs": dict(d.get("inputs") or {}),
                                               "chosen": tuple(Relation(**r) for r in d.get("chosen") or ()),
                                               "instead": tuple(Relation(**r) for r in d.get("instead") or ())}),
        }
        values = {"question_id": "", "question": "", **_fields(cls, data)}
        for key, make in nested.items():
            if key in values:
                values[key] = [make(x) for x in values[key] if isinstance(x, dict)]
        if values.get("error_kind") is not None:
            values["error_kind"] = ErrorKind(values["error_kind"])
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @property
    def prompt_tokens(self) -> int:
        return sum(c.prompt_tokens for c in self.llm_calls)

    @property
    def uncached_prompt_tokens(self) -> int:
        """Prompt tokens the model really computed (no record/replay hit, no prefix-cache hit)."""
        return sum(c.prompt_tokens - c.cached_prompt_tokens for c in self.llm_calls if not c.cache_hit)

    @property
    def completion_tokens(self) -> int:
        return sum(c.completion_tokens for c in self.llm_calls)

    @property
    def seconds(self) -> float:
        return self.timings.get("total", 0.0)

    def to_row(self) -> dict[str, Any]:
        """One row of :data:`kifqa.runs.schema.TRACE_SCHEMA`."""
        return {
            "question_id": self.question_id,
            "question": self.question,
            "kb": self.kb,
            "model": self.model,
            "draft": [str(p) for p in self.draft],
            "entities": self.entities,
            "relations": [f"{r.entity} {r.property} {r.direction}" for r in self.relations],
            "n_answers": self.n_answers,
            "llm_calls": len(self.llm_calls),
            "llm_cache_hits": sum(c.cache_hit for c in self.llm_calls),
            "prompt_tokens": self.prompt_tokens,
            "uncached_prompt_tokens": self.uncached_prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "kb_calls": self.kb_calls,
            "seconds": self.seconds,
            "error": self.error,
            "error_step": self.error_step,
            "trace": self.to_json(),
        }


def _plain(x: Any) -> Any:
    """What :func:`dataclasses.asdict` gives for ``x`` (dataclasses as dicts, containers rebuilt), without its
    deep copy of every leaf: a trace's leaves are strings, numbers and enums, never changed in place."""
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    if is_dataclass(x) and not isinstance(x, type):
        return {name: _plain(getattr(x, name)) for name in _names(type(x))}
    if isinstance(x, (list, tuple)):
        return type(x)(map(_plain, x))
    if isinstance(x, dict):
        return {_plain(k): _plain(v) for k, v in x.items()}
    return x


@functools.cache
def _names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


def _fields(kind: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The items of ``data`` that are fields of the dataclass ``kind``, nulls left out."""
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names and v is not None}


@dataclass
class Result:
    """A question's answers and its trace."""

    question: Question
    answers: list[Answer]
    trace: Trace

    def answer_rows(self) -> list[dict[str, Any]]:
        """Rows of :data:`kifqa.runs.schema.ANSWER_SCHEMA`."""
        return [
            {
                "question_id": self.question.id,
                "question": self.question.text,
                "kb": self.trace.kb,
                "subject": a.fact.subject,
                "subject_label": a.fact.subject_label,
                "property": a.fact.property,
                "property_label": a.fact.property_label,
                "value": a.fact.value,
                "value_label": a.fact.value_label,
                "value_type": a.fact.value_type,
                "answer": a.answer,
                "answer_label": a.answer_label,
            }
            for a in self.answers
        ]
