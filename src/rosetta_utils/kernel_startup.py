"""Run by every kernel of a book build, as its PYTHONSTARTUP file.

It installs :mod:`rosetta_utils.tab_namespaces` with the plan of the page being
executed, which the Sphinx extension :mod:`rosetta_utils.tabs` passes in the
``ROSETTA_TAB_PLAN`` environment variable. If that fails, every cell of the
page fails with the reason, rather than running with the tabs' names mixed up.
"""


def _install_rosetta_tab_namespaces() -> None:
    import json
    import os

    from IPython import get_ipython

    shell = get_ipython()
    plan = os.environ.get("ROSETTA_TAB_PLAN")
    if shell is None or not plan:
        return
    try:
        from rosetta_utils.tab_namespaces import install

        install(shell, [(framework, digest) for framework, digest in json.loads(plan)])
    except Exception as error:  # noqa: BLE001 - reported in every cell instead
        reason = f"{type(error).__name__}: {error}"

        def refuse(lines: list[str]) -> list[str]:
            raise RuntimeError(f"rosetta tab namespaces could not be installed: {reason}")

        shell.input_transformers_post.append(refuse)


_install_rosetta_tab_namespaces()
del _install_rosetta_tab_namespaces
