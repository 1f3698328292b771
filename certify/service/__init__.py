"""``certify serve``: the certification service (FastAPI on uvicorn).

:mod:`.server` checks everything and starts it; :mod:`.datadir` owns the data
folder (manifest, lock); :mod:`.config` holds every bound; :mod:`.schema`,
:mod:`.store` and :mod:`.queue` are the database (certificates, files, the
job queue with leases); :mod:`.dispatcher`, :mod:`.launcher` and
:mod:`.worker` run jobs in processes tied to the server; :mod:`.options` and
:mod:`.uploads` check what users send; :mod:`.guard` and :mod:`.app` are the
HTTP side. Jobs call the same library API as the command line
(:mod:`certify.api`)."""
