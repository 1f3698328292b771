"""Certificates -> a report for people and for papers: ``report.md`` and figures
(:mod:`.build`), a LaTeX fragment (:mod:`.latex`).

``python -m certify.report`` runs the ``certify report`` command.
"""
