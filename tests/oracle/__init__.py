"""The differential oracle's helpers: genuine certificates made by the project's own
producers (:mod:`tests.oracle.genuine`), their mutations (:mod:`tests.oracle.mutations`) and
the two checkers run side by side (:mod:`tests.oracle.runner`)."""
