"""Which example pool answered an evaluation, and the guard against a pool drawn from the evaluated questions.

A dataset's splits share a few questions word for word (mostly with the same gold): such a question is answered
without its own example (:class:`~kifqa.examples.embeddings.EmbeddedPool` never shows a question itself), so a few
are harmless. A pool that holds the evaluated questions themselves (a split evaluated with the pool drawn from it,
a user's pool file holding the test questions) shapes its clusters, priors and nearest neighbours on them, and its
figures say little of unseen questions: :func:`checked_pool` refuses an evaluation where the pool holds more than
:data:`MAX_SHARE` of the questions, unless allowed, and then the record says so. The record (what ``metrics.json``
keeps under ``pool`` and ``kifqa eval --table`` shows) counts the questions the pool holds either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kifqa.data.pool import SDBQA_HELD_OUT
from kifqa.errors import ConfigError, KifqaError

if TYPE_CHECKING:
    from kifqa.eval.datasets import GoldQuestion
    from kifqa.examples import Pool

#: Which questions each built-in pool holds, and which to evaluate instead.
HELD = {
    "sqwd": "SimpleQuestions-Wikidata's training split: evaluate sqwd:valid",
    "sdbqa": f"SimpleDBpediaQA valid 0-{SDBQA_HELD_OUT - 1}: evaluate sdbqa:valid --start {SDBQA_HELD_OUT}",
}
#: Overlapping questions an error names.
NAMED = 3
#: The share of the evaluated questions a pool may hold before the evaluation is refused: the splits of a dataset
#: share up to 2.5% word for word (SimpleQuestions-Wikidata valid: 66 of 2,821 in train; SimpleDBpediaQA valid
#: 700+: 13 of 3,605 in 0-699), while a pool drawn from the evaluated questions holds all of them, and the
#: SimpleDBpediaQA pool a tenth of SimpleQuestions-Wikidata valid (294: both are SimpleQuestions' valid split).
MAX_SHARE = 0.05


class PoolOverlapError(ConfigError):
    """The example pool holds more than :data:`MAX_SHARE` of the questions the evaluation would score."""


@dataclass(frozen=True, kw_only=True)
class PoolRecord:
    """The pool that answered an evaluation: its name (a built-in or a file), content hash
    (:attr:`~kifqa.examples.pool.Pool.digest`), size, how many of the scored questions it holds and whether that is
    more than :data:`MAX_SHARE` of them (scored only where allowed). ``None``: not known, the pool a run answered
    with could not be opened again."""

    name: str
    digest: str
    examples: int | None
    overlap: int | None = 0
    over_limit: bool | None = False

    @property
    def label(self) -> str:
        """The pool as the traces name it (``sdbqa@3f2a…``)."""
        return f"{self.name}@{self.digest}"

    @property
    def short(self) -> str:
        """The pool in a table cell: a file's name rather than its path, the hash's first 8 digits and the
        overlap where there is one."""
        name = Path(self.name).name if Path(self.name).suffix else self.name
        if self.overlap is None:
            return f"{name}@{self.digest[:8]} (overlap unchecked)"
        limit = f", over {MAX_SHARE:.0%}" if self.over_limit else ""
        return f"{name}@{self.digest[:8]}" + (f" ({self.overlap} in pool{limit})" if self.overlap else "")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PoolRecord:
        """The record ``metrics.json`` keeps (:func:`dataclasses.asdict` of one)."""
        return cls(name=str(data["name"]), digest=str(data["digest"]), examples=data.get("examples"),
                   overlap=data.get("overlap"), over_limit=data.get("over_limit"))


def traced_pool(labels: Iterable[str], reopen: Callable[[], Pool], questions: Sequence[GoldQuestion], *,
                dataset: str, allow: bool) -> PoolRecord | None:
    """The record of the pool a run's traces name (``labels``: each trace's ``pool``, ``""`` where it names
    none), checked as :func:`checked_pool` checks it where ``reopen`` (the pool the run's settings name) opens
    that same pool; where it cannot, the record names the pool and leaves its size and overlap unknown
    (``None``). ``None`` where no trace names a pool (a run of an older kifqa); :class:`ConfigError` where the
    traces name several (a run resumed with another pool: score each part on its own)."""
    named = sorted(set(labels) - {""})
    if not named:
        return None
    if len(named) > 1:
        raise ConfigError(f"the run's traces name {len(named)} example pools ({', '.join(named)}): its questions "
                          "were answered with different pools; score the questions of each pool on their own")
    name, _, digest = named[0].rpartition("@")
    try:
        pool = reopen()
    except KifqaError:
        pool = None
    if pool is None or pool.label != named[0]:
        return PoolRecord(name=name, digest=digest, examples=None, overlap=None, over_limit=None)
    return checked_pool(pool, questions, dataset=dataset, allow=allow)


def checked_pool(pool: Pool, questions: Sequence[GoldQuestion], *, dataset: str, allow: bool) -> PoolRecord:
    """The record of ``pool`` answering ``questions`` (of ``dataset``); where the pool holds more than
    :data:`MAX_SHARE` of them, :class:`PoolOverlapError` naming them and what to do instead, unless ``allow``."""
    held = [q for q in questions if pool.asks(q.text)]
    over = len(held) > MAX_SHARE * len(questions)
    if over and not allow:
        shown = ", ".join(q.id for q in held[:NAMED]) + (f", … {held[-1].id}" if len(held) > NAMED else "")
        advice = f" (the {pool.name} pool is {HELD[pool.name]})" if pool.name in HELD else ""
        raise PoolOverlapError(
            f"{len(held)} of the {len(questions)} questions of {dataset} to evaluate are in the example pool "
            f"{pool.label} ({shown}), more than the {MAX_SHARE:.0%} a dataset's splits share: a pool drawn from the "
            f"questions it answers inflates the figures. Evaluate questions the pool does not hold{advice}, choose "
            "another pool (examples.pool, e.g. KIFQA_EXAMPLES__POOL=...), or pass --allow-pool-overlap to score "
            "them anyway (metrics.json then says so under pool.over_limit)")
    return PoolRecord(name=pool.name, digest=pool.digest, examples=len(pool.examples), overlap=len(held),
                      over_limit=over)
