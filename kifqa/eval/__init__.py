"""Evaluation and silver data: datasets (:mod:`.datasets`), the KIF-QA paper's metrics
(:mod:`.metrics`), scoring with linking accuracy and failure classes (:mod:`.run`), reports
(:mod:`.report`), run comparison (:mod:`.compare`) and silver datasets (:mod:`.silver`). It reads run
folders through :mod:`kifqa.runs` and the data folder through :mod:`kifqa.data`, and imports no Ray."""
