"""``kifqa silver``: a silver KBQA dataset from unlabelled questions, a release folder of it, and a release checked
against today's base (see docs/eval.md)."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kifqa.cli.options import concurrency_option, fail, load_settings, settings_options
from kifqa.errors import KifqaError
from kifqa.llm.factory import in_process_instances
from kifqa.types import Result

if TYPE_CHECKING:
    from kifqa.config import Settings
    from kifqa.eval.confidence_fit import ConfidenceModel
    from kifqa.eval.silver import Rater, SilverSummary
    from kifqa.runs import Prediction


@click.command()
@click.argument("corpus", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write silver.parquet, silver.jsonl and silver-summary.json here (with --batch: also the run; "
                   "with --recheck: recheck.parquet and recheck.json, by default in the release's recheck/).")
@click.option("--limit", type=int, help="Only the first N questions of CORPUS.")
@concurrency_option
@click.option("--batch", is_flag=True, help="Answer with the Ray batch job (kifqa run) into --out.")
@click.option("--run", "run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Build the silver data from an existing batch run folder instead of answering CORPUS.")
@click.option("--min-confidence", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True,
              help="Leave out answered questions below this confidence.")
@click.option("--target-precision", type=click.FloatRange(0.0, 1.0),
              help="Keep only answers above the confidence threshold for this precision: the one chosen in "
                   "--calibration, else the one the confidence model's held-out check chose over --kb.")
@click.option("--calibration", "calibration_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A kifqa eval folder on gold data (its metrics.json calibration curve) for --target-precision.")
@click.option("--release", "release_dir",
              help="Also write a publishable dataset folder here (a path or object-store URI): Parquet splits by "
                   "topic, near-duplicates folded, a dataset card.")
@click.option("--recheck", "recheck_dir",
              help="Execute the queries of the release at this path or URI again against --kb and report the rows "
                   "whose answers changed (answers nothing).")
@click.option("--confidence-model", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A fitted confidence (kifqa eval --fit-confidence) to rate the rows with; by default the one "
                   "kifqa ships, else the hand-set product of four factors.")
@settings_options
def silver(corpus: Path | None, out: Path | None, limit: int | None, concurrency: int | None, batch: bool,
           run_dir: Path | None, min_confidence: float, target_precision: float | None, calibration_dir: Path | None,
           release_dir: str | None, recheck_dir: str | None, confidence_model: Path | None, config: Path | None,
           kb: str | None, model: str | None, examples: str | None) -> None:
    """Answer the unlabelled questions of CORPUS (JSONL, CSV or Parquet with id and question columns)
    and write each answered one whose query reproduces its answers, with that query, its answers and a
    confidence."""
    settings = load_settings(config, kb, model, examples)
    if recheck_dir is not None:
        if corpus is not None or run_dir is not None or release_dir is not None:
            raise click.UsageError("--recheck takes a release folder alone (and --kb, --out)")
        return _recheck(settings, recheck_dir, out)
    if (corpus is None) == (run_dir is None):
        raise click.UsageError("give either CORPUS or --run DIR")
    if out is None:
        raise click.UsageError("--out is needed to answer CORPUS or read --run")
    if run_dir is not None and batch:
        raise click.UsageError("--batch answers CORPUS; --run reads a finished run")
    if calibration_dir is not None and target_precision is None:
        raise click.UsageError("--calibration is read for --target-precision: give both")
    concurrency = concurrency or settings.llm.in_flight * in_process_instances(settings)
    from kifqa.eval.confidence_fit import ConfidenceModel, default_model, rater
    from kifqa.eval.silver import write_silver
    from kifqa.report.sources import PAGE, write_silver_report
    try:
        fitted = default_model() if confidence_model is None else ConfidenceModel.read(confidence_model)
        calibration = None
        if target_precision is not None:
            calibration = _calibration(fitted, settings.kb.spec, target_precision, calibration_dir)
            min_confidence = max(min_confidence, calibration["threshold"])
        predictions = _predictions(settings, corpus, run_dir, out, limit=limit, batch=batch, concurrency=concurrency)
        rate = rater(fitted)
        rows, summary, build = asyncio.run(_silver(settings, predictions, min_confidence, rate))
        summary.calibration = calibration
        parquet, jsonl = write_silver(rows, out, summary)
        page = write_silver_report(out / PAGE, predictions=predictions, summary=summary.as_dict(), rater=rate)
        if release_dir is not None:
            _release(settings, rows, summary, release_dir, source=str(corpus or run_dir), build=build)
    except KifqaError as err:
        raise fail(err) from err
    click.echo(summary.render())
    click.echo(f"wrote {parquet}, {jsonl} and {page}" + (f"; the release in {release_dir}" if release_dir else ""))


def _calibration(model: ConfidenceModel | None, kb: str, target: float, folder: Path | None) -> dict[str, Any]:
    """The threshold for ``target`` precision: from a labelled evaluation folder where one is given, else from the
    confidence model's own held-out check over ``kb``."""
    from kifqa.eval.calibration import run_threshold
    from kifqa.eval.confidence_fit import checked_threshold

    if folder is not None:
        return {**run_threshold(folder, target), "source": f"the kifqa eval run {folder.name}"}
    if model is None:
        raise click.UsageError("--target-precision needs --calibration DIR (kifqa ships no fitted confidence with "
                               "a held-out check; give --confidence-model FILE or a calibration run)")
    return checked_threshold(model, kb.strip(), target)


def _predictions(settings: Settings, corpus: Path | None, run_dir: Path | None, out: Path, *, limit: int | None,
                 batch: bool, concurrency: int) -> list[Prediction]:
    """The predictions of a finished run, or of CORPUS answered now (in-process or by the batch job)."""
    from kifqa.runs import read_run

    if run_dir is not None:
        return list(read_run(run_dir).values())
    from kifqa.eval.sources import predict
    from kifqa.runs import read_corpus

    assert corpus is not None  # CORPUS or --run (checked by the command)
    b = settings.batch
    questions = read_corpus(corpus, id_column=b.id_column, question_column=b.question_column,
                            max_chars=settings.pipeline.max_question_chars).questions()
    questions = questions[:limit] if limit else questions

    def progress(r: Result) -> None:
        sys.stderr.write(f"{r.question.id}\t{len(r.answers)} answers\t{r.trace.error or ''}\n")

    if batch and limit:  # the first N usable questions, as a corpus of their own
        questions = [q for q in questions if not q.error]
    predicted = predict(settings, questions, via="batch" if batch else "process", out=out,
                        corpus=None if limit else corpus, concurrency=concurrency, progress=progress)
    if predicted.job is not None:
        click.echo(predicted.job.render(), err=True)
    return list(predicted.predictions.values())


async def _silver(settings: Settings, predictions: list[Prediction], min_confidence: float,
                  rater: Rater) -> tuple[list[dict[str, Any]], SilverSummary, str | None]:
    """The silver rows, each query executed again on the configured base; and the hash of its local build."""
    from kifqa.eval.silver import build_silver
    from kifqa.kb.spec import open_kb

    kb = open_kb(None, settings)
    try:
        return (*await build_silver(predictions, kb, min_confidence=min_confidence, rater=rater), kb.build)
    finally:
        await kb.aclose()


def _release(settings: Settings, rows: list[dict[str, Any]], summary: SilverSummary, dest: str, *,
             source: str, build: str | None) -> None:
    from kifqa.eval.release import Provenance, write_release
    from kifqa.kb.spec import kb_routes
    from kifqa.redact import redact
    from kifqa.runs.storage import shown

    spec = settings.kb.spec
    models = sorted({r["model"] for r in rows if r.get("model")})
    counts = {k: v for k, v in summary.as_dict().items() if isinstance(v, int)}
    endpoint = kb_routes(settings).url or f"kifqa's local build {build or ''} ({spec})"
    provenance = Provenance(corpus=shown(source), kb=redact(spec), endpoint=redact(endpoint),
                            model=", ".join(models) or settings.llm.model, kifqa_version=version("kifqa"),
                            date=datetime.now(UTC).date().isoformat(), confidence=summary.confidence,
                            calibration=summary.calibration,
                            counts=counts)
    write_release(rows, dest, provenance)


def _recheck(settings: Settings, src: str, out: Path | None) -> None:
    from kifqa.eval.recheck import read_release, recheck, write_recheck
    from kifqa.kb.spec import open_kb
    from kifqa.runs.storage import is_uri

    async def run() -> Any:
        kb = open_kb(None, settings)
        try:
            return await recheck(read_release(src), kb)
        finally:
            await kb.aclose()

    try:
        result = asyncio.run(run())
        where = out if out is not None else (f"{src.rstrip('/')}/recheck" if is_uri(src) else Path(src) / "recheck")
        write_recheck(result, where)
    except KifqaError as err:
        raise fail(err) from err
    click.echo(result.render())
    click.echo(f"wrote {where}/recheck.parquet and recheck.json")
