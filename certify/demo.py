"""``python -m certify.demo``: the ``certify demo`` command (:mod:`certify.cli.demo`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("demo"))
