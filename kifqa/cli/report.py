"""``kifqa report``: one self-contained HTML page to browse a run's questions, failures and traces."""

from __future__ import annotations

from pathlib import Path

import click

from kifqa.cli.location import Location
from kifqa.cli.options import fail
from kifqa.errors import KifqaError


@click.command()
@click.argument("run_dir", required=False, type=Location(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="The page to write; default RUN_DIR/report.html (with --compare: compare.html here).")
@click.option("--compare", nargs=2, type=Location(exists=True, file_okay=False),
              metavar="A B", help="The questions two run or evaluation folders answered differently, side by side.")
def report(run_dir: Path | str | None, out: Path | None, compare: tuple[Path | str, Path | str] | None) -> None:
    """Write the report page of RUN_DIR (a `kifqa run`, `kifqa eval` or `kifqa silver --batch` folder, or a
    `kifqa run` folder at a URI such as s3://bucket/runs/x, with --out):
    summary and plots, a searchable question table, and each question's trace step by step."""
    from kifqa.report.sources import write_compare_report, write_folder_report

    if (run_dir is None) == (compare is None):
        raise click.UsageError("give RUN_DIR or --compare A B")
    try:
        if compare:
            path = write_compare_report(*compare, out or Path("compare.html"))
        else:
            assert run_dir is not None
            path = write_folder_report(run_dir, out)
    except KifqaError as err:
        raise fail(err) from err
    click.echo(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
