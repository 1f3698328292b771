"""Independent exact checkers, one module per claim family.

Every module here imports only the standard library (``fractions``,
``hashlib``, ``json``), numpy and python-flint: never a solver, torch or any
other part of the project except :mod:`certify.checkers` itself. Each module
exposes ``check(claim: dict, cert: dict) -> list[str]`` returning the list of
problems found (empty means the claim's verdict is re-derived exactly).
"""
