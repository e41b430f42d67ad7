"""PYTHONSTARTUP of every kernel MyST-NB itself would start during a book build.

The book never lets MyST-NB execute a page in one kernel: the extension
:mod:`rosetta_book.sphinx_extension` runs each framework's part on its own and hands
MyST-NB the merged outputs through its execution cache. If MyST-NB ever
started a kernel anyway (its cache lookup missed), every cell fails with
this reason instead of running the page's tabs on top of each other.
"""


def _refuse_every_cell() -> None:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return

    def refuse(lines):
        raise RuntimeError(
            "MyST-NB started executing a page itself: the outputs of the page's framework "
            "parts were not found in its execution cache (rosetta_book.sphinx_extension)"
        )

    shell.input_transformers_post.append(refuse)


_refuse_every_cell()
del _refuse_every_cell
