"""``python -m certify.report``: the ``certify report`` command (:mod:`certify.cli.report`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("report"))
