"""The reviewer's slow path: ``certify verify --reference CERT.json...``.

A second checker, written apart from the fast one (:mod:`certify.checkers`) to
cross-check it. It imports of the project only the definition of the format:
the certificate's JSON Schema (:mod:`certify.checkers.schema`), the reading of a
certificate file (:mod:`certify.checkers.reading`, shared so that both refuse the
same files) and the statement renderer with its field table
(:mod:`certify.checkers.statements`, which reads :mod:`certify.checkers.kinds` and
:mod:`certify.checkers.names`: what a claim means is defined once); an
import-linter contract in ``pyproject.toml`` holds it to that. No compiled
extension of the project, no cache, no float shortcut, no randomized test:
every number it decides is an ``int``, a ``Fraction``, a python-flint
``fmpz``/``fmpq`` matrix or polynomial, or an ``arb`` ball that decides only
when the whole ball agrees (exp / elu1 transcripts).

What it re-derives, per claim kind, by the most direct method it knows
(``docs/trust.md``, "The reviewer's slow path", has the table):

* ``exact_rank`` -- the whole kernel matrix, exactly (features multiplied out,
  or the matrix file re-read), ranked by flint over Q; the claim's bounds must
  be that rank (``proved``) or enclose it (``unknown``). A minor, a null-space
  basis or a Freivalds plan is not read: the rank is computed.
* ``eps_rank`` -- the count of singular values above ``eps``: the exact
  characteristic polynomial of the kernel's Gram (or of the ``r x r`` Gram
  product, the same nonzero eigenvalues), its roots above ``eps^2`` counted
  with multiplicity by Descartes' rule on ``p(x + eps^2)`` (exact: the
  polynomial is real-rooted); every stated enclosure of a squared singular
  value is checked by two such counts.
* ``nonnegative`` -- every entry of the kernel matrix, exactly.
* ``code_rank`` -- Lemma 4's ``B[S,U] = alpha(x_S, x_(U^c))`` from the
  kernel's own features, its bound recomputed, and the kernel's exact rank
  must reach it.
* ``feasible`` -- the witness head evaluated at every scored position of the
  re-validated family; ``infeasible`` -- the Lemma 3 chains re-derived from
  the family, then Lemma 4 and its refinements, or the convex dual
  certificate (its norm condition by an exact characteristic polynomial).
* ``correctness`` / ``gap_domination`` -- the head's outputs on every scored
  position, and every jump's Lemma 3 inequality, in Fractions.
* ``transcript`` -- the sketch model replayed in Fractions (identity, relu) or
  arb balls (exp, elu1) on every assignment or on the stated pair
  (:mod:`~certify.reference.transcript`);
* ``bound`` -- the paper's closed forms, with ints and Fractions;
* ``theorem`` -- Thm 1 and Thm 6 part 1 at every position of every sequence
  over the cube (Fractions, or ``arb`` balls at a doubling precision), Thm 8's
  positional head on its family in Fractions with the chains' Lemma 4 bound
  and the effective kernel's rank by flint (:mod:`~certify.reference.theorems`).

Every claim's sentence is rendered again and compared (the format's renderer),
and claims that contradict each other across the certificates of one call fail
(:mod:`~certify.reference.contradictions`: needed where a claim holds only under
an assumption). Built-in families are pinned (``paper-5.1``) or rebuilt
(:mod:`~certify.reference.builtin`). Not read: rank witnesses (minors, null-space
bases, column-span and Freivalds witnesses): the rank is computed.

Sources are bound by content: every named input file present (found as
``verify`` finds it, :func:`~certify.reference.files.locate`) is re-read and its
sha256 compared; a head's ``.safetensors`` weights re-hashed into their canonical
``weights_sha256`` by the reference's own header reader; matrix and feature files are read exactly or refused
(:mod:`certify.reference.files`); an extraction (a checkpoint's weights ->
features step) is replayed with ``--replay-extraction`` in a separate process
(:mod:`certify.reference.replay`), its features written to a file, hashed
here and every kernel claim re-derived from them; without it, the same named
assumption as the fast checker (``extraction:<source>``, exit 4).

Sizes are limited by the constants of :mod:`certify.reference.limits`; above
them the input is refused (exit 2, one line naming the size and the limit).
"""
