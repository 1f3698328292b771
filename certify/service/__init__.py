"""``certify serve``: the certification service (FastAPI on uvicorn): a job queue
and worker processes (:mod:`.jobs`), a certificate store in a database
(:mod:`.store`), web pages and the HTTP API (:mod:`.app`). It calls the same
library API as the command line (:mod:`certify.api`)."""
