"""``python -m certify.feasibility``: the ``certify feasibility`` command (:mod:`certify.cli.feasibility`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("feasibility"))
