"""``kifqa silver``: a silver KBQA dataset from unlabelled questions (see docs/eval.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kifqa.cli.options import concurrency_option, fail, load_settings, settings_options
from kifqa.errors import KifqaError
from kifqa.llm.factory import in_process_instances
from kifqa.types import Result


@click.command()
@click.argument("corpus", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Write silver.parquet, silver.jsonl and silver-summary.json here (with --batch: also the run).")
@click.option("--limit", type=int, help="Only the first N questions of CORPUS.")
@concurrency_option
@click.option("--batch", is_flag=True, help="Answer with the Ray batch job (kifqa run) into --out.")
@click.option("--run", "run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Build the silver data from an existing batch run folder instead of answering CORPUS.")
@click.option("--min-confidence", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True,
              help="Leave out answered questions below this confidence.")
@click.option("--target-precision", type=click.FloatRange(0.0, 1.0),
              help="Keep only answers above the confidence threshold that reached this precision in --calibration.")
@click.option("--calibration", "calibration_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A kifqa eval folder on gold data (its metrics.json calibration curve) for --target-precision.")
@settings_options
def silver(corpus: Path | None, out: Path, limit: int | None, concurrency: int | None, batch: bool,
           run_dir: Path | None, min_confidence: float, target_precision: float | None, calibration_dir: Path | None,
           config: Path | None, kb: str | None, model: str | None,
           examples: str | None) -> None:
    """Answer the unlabelled questions of CORPUS (JSONL, CSV or Parquet with id and question columns)
    and write each answered one with its logical form, answers and a confidence."""
    from kifqa.eval.silver import build_silver, write_silver
    from kifqa.report.sources import PAGE, write_silver_report
    from kifqa.runs import read_run

    if (corpus is None) == (run_dir is None):
        raise click.UsageError("give either CORPUS or --run DIR")
    if run_dir is not None and batch:
        raise click.UsageError("--batch answers CORPUS; --run reads a finished run")
    if (target_precision is None) != (calibration_dir is None):
        raise click.UsageError("--target-precision and --calibration go together")
    settings = load_settings(config, kb, model, examples)
    concurrency = concurrency or settings.llm.in_flight * in_process_instances(settings)
    try:
        calibration = None
        if calibration_dir is not None and target_precision is not None:  # given together (checked above)
            from kifqa.eval.calibration import run_threshold

            calibration = run_threshold(calibration_dir, target_precision)
            min_confidence = max(min_confidence, calibration["threshold"])
        if run_dir is not None:
            predictions = list(read_run(run_dir).values())
        else:
            from kifqa.runs import read_corpus

            assert corpus is not None  # CORPUS or --run (checked above)
            b = settings.batch
            questions = read_corpus(corpus, id_column=b.id_column, question_column=b.question_column,
                                    max_chars=settings.pipeline.max_question_chars).questions()
            questions = questions[:limit] if limit else questions
            from kifqa.eval.sources import predict

            def progress(r: Result) -> None:
                sys.stderr.write(f"{r.question.id}\t{len(r.answers)} answers\t{r.trace.error or ''}\n")

            if batch and limit:  # the first N usable questions, as a corpus of their own
                questions = [q for q in questions if not q.error]
            predicted = predict(settings, questions, via="batch" if batch else "process", out=out,
                                corpus=None if limit else corpus, concurrency=concurrency, progress=progress)
            if predicted.job is not None:
                click.echo(predicted.job.render(), err=True)
            predictions = list(predicted.predictions.values())
        rows, summary = build_silver(predictions, min_confidence=min_confidence)
        summary.calibration = calibration
        parquet, jsonl = write_silver(rows, out, summary)
        page = write_silver_report(out / PAGE, predictions=predictions, summary=summary.as_dict())
    except KifqaError as err:
        raise fail(err) from err
    click.echo(summary.render())
    click.echo(f"wrote {parquet}, {jsonl} and {page}")
