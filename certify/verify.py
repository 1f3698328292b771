"""``python -m certify.verify``: the ``certify verify`` command (:mod:`certify.cli.verify`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("verify"))
