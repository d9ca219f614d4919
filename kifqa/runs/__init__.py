"""Run folders, without Ray: what a job writes and how it is read back.

This package owns the run folder: its layout and commit protocol (:mod:`.folder`: ``answers/`` and
``traces/`` Parquet shards, ``manifest.json``), where it lives (:mod:`.storage`: a local path or a URI
that pyarrow opens), one run at a time in it (:mod:`.lock`), its Arrow schemas (:mod:`.schema`), the
manifest and the job key (:mod:`.manifest`), reading a corpus of questions (:mod:`.corpus`) and reading
a run back (:mod:`.results`: a :class:`Prediction` per question, the manifest's figures). The batch job
(:mod:`kifqa.batch`) writes run folders through it; evaluation, reports and silver data read them
through it, with no Ray imported.
"""

from __future__ import annotations

from kifqa.runs.corpus import Corpus, read_corpus
from kifqa.runs.folder import RunFolder
from kifqa.runs.results import Prediction, read_run
from kifqa.runs.schema import ANSWER_SCHEMA, TRACE_SCHEMA

__all__ = ["ANSWER_SCHEMA", "TRACE_SCHEMA", "Corpus", "Prediction", "RunFolder", "read_corpus", "read_run"]
