"""The Rosetta book's build engine: pages, parts, kernels, caches, downloads, Sphinx.

What a page's reader needs lives in :mod:`rosetta_utils` (data sets, weight
layouts and checkpoints, recorders, the divergence command, timing); what only
the book's proofs need in :mod:`rosetta_proof` (verdicts, tables, the checklist).
This package builds the book around both and is never imported by a tab:

- :mod:`.page`: a page's cells and their roles (shared, framework, comparison);
- :mod:`.downloads`: each framework's part of a page as a notebook and a script;
  :mod:`.unread_lines` finds the lines a download keeps that nothing reads, and
  :mod:`.downloads_check` runs every download from its own install line;
- :mod:`.python_source`: Python source parsed safely from the build's threads;
- :mod:`.environments`: which Python environment runs which framework;
- :mod:`.build_plan`: what a build runs of each framework under the profile;
- :mod:`.page_execution`: every part in a kernel of its own environment, then
  the comparisons, each part cached with jupyter-cache (:mod:`.one_framework`: the
  guard that lets a part import its framework only; :mod:`.myst_nb_guard`: the one
  that stops MyST-NB from executing a page itself);
- :mod:`.machine_slots`, :mod:`.timed_cells`, :mod:`.clock_watch`: how parts share the
  machine cell by cell, which cells time something and run alone, and the check
  that no other cell read a clock;
- :mod:`.build_cache`: a page's merged outputs, reused while its code is unchanged;
- :mod:`.build_report`: what the site says of its build (build line, table);
- :mod:`.chapter`: the loader tests and benchmarks run a page's code through;
- :mod:`.name_check`: the checks a page must pass to build;
- :mod:`.decisive_calls`, :mod:`.record_defaults`: the calls a table's rows decide by,
  and the command that records their defaults;
- :mod:`.table_links`: the divergence command's links to the tables' rows;
- :mod:`.search_index`, :mod:`.checklist_pages`: the site's search index and the
  checklist's pairs in files of their own;
- :mod:`.sphinx_extension`: the thin Sphinx adapter (events, tabs, links);
- :mod:`.bench`, :mod:`.gpu_check` and :mod:`.gpu_lessons`: the benchmark, the
  device check and the GPU lessons' measurements it runs (:mod:`.gpu_processes`:
  their child processes).

It imports :mod:`rosetta_utils` and :mod:`rosetta_proof`; neither imports it.
"""

__version__ = "0.2.0"
