"""The HTML report: one self-contained page to browse a run's figures, questions and traces
(``kifqa report``; ``kifqa eval`` and ``kifqa silver`` write it too). See docs/eval.md."""
