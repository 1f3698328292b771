"""``python -m certify.families``: the ``certify families`` command (:mod:`certify.cli.families`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("families"))
