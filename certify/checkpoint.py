"""``python -m certify.checkpoint``: the ``certify checkpoint`` command (:mod:`certify.cli.checkpoint`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("checkpoint"))
