"""The data layer: the shared data folder (``KIFQA_DATA_DIR``) and the keys its texts and ids are compared by.

It owns the folder's file names (:mod:`.paths`), one reader per source (:mod:`.wikidata` labels,
properties and statements; :mod:`.sqwd` SimpleQuestions-Wikidata; :mod:`.sdbqa` SimpleDBpediaQA;
:mod:`.dbpedia_map` the DBpedia build's links), the text keys (:mod:`.text`: ``normalize``,
``name_key``, ``question_key``) and the id helpers (:mod:`.ids`). The builds, the example pool and the
evaluation read the data through it; it imports nothing else of kifqa but its errors.
"""
