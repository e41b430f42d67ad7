"""The book's proof library: what its comparison cells and its build engine import.

Verdicts (:mod:`.equivalence`), which gradients float32 determines where ReLUs and max
pools decide (:mod:`.decisions`), the condition grids of the translation tables
(:mod:`.translation_checks`) and the tables built from them (:mod:`.compact_table`,
:mod:`.checklist`), what each framework part leaves for the comparisons
(:mod:`.tab_results`), the records of runs and the tables shown from them
(:mod:`.records`, :mod:`.record_tables`, :mod:`.knob_table`), the reference's
figures (:mod:`.reference`) and plain tables (:mod:`.tables`).

It imports the reader's library (``rosetta_utils``) and never the build engine
(``rosetta_book``); no download imports it.
"""
