"""``python -m certify.bounds``: the ``certify bounds`` command (:mod:`certify.cli.bounds`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("bounds"))
