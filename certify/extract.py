"""``python -m certify.extract``: the ``certify extract`` command (:mod:`certify.cli.extract`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("extract"))
