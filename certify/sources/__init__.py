"""Reading a kernel alpha(x, z) from any source: a matrix or kernel file
(:mod:`.files`), a ``models/`` checkpoint or a third-party layer
(:mod:`.checkpoint`), resolved in one order (:mod:`.paths`) by one loader
(:mod:`.load`)."""
