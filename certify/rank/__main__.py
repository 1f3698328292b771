"""``python -m certify.rank``: the ``certify rank`` command (:mod:`certify.cli.rank`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("rank"))
