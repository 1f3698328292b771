"""``python -m certify.serve``: the ``certify serve`` command (:mod:`certify.cli.serve`)."""

if __name__ == "__main__":
    from certify.cli import run

    raise SystemExit(run("serve"))
