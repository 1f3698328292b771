"""``python -m certify.transcript``: the ``certify transcript`` command (:mod:`certify.cli.transcript`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("transcript"))
