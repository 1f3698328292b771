"""certify-attention: exact and certified-numeric certificates for claims about
normalized nonnegative kernel (linear) attention (``../shared/paper/THEOREMS.md``).

Packages, bottom to top (each imports only those below it; the contracts are
in ``pyproject.toml`` and ``lint-imports`` enforces them):

* :mod:`certify.checkers` -- the independent checker (numpy, fractions, python-flint);
* :mod:`certify.core` -- the floor (errors, limits, exact numbers, files, output
  folders, the parallel engine) and the paper's objects (cube, codes, families,
  bounds, kernels, claims and certificates);
* ``solvers`` and ``models`` (top-level packages) -- numeric and exact engines;
  torch heads, feature maps, constructions, training, third-party layouts;
* :mod:`certify.sources` -- reading a kernel from any source;
* :mod:`certify.rank`, :mod:`certify.feasibility`, :mod:`certify.transcript`,
  :mod:`certify.audit`, :mod:`certify.report` -- one capability each;
* :mod:`certify.checkpoints` -- a trained model, end to end;
* :mod:`certify.api` -- the library API; :mod:`certify.service` and
  :mod:`certify.cli` -- its two fronts.

``certify/<command>.py`` modules (``bounds``, ``families``, ...) exist only so
that ``python -m certify.<command>`` keeps working; each delegates to
:mod:`certify.cli`.
"""
