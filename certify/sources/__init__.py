"""Reading a kernel alpha(x, z) from any source, the same way for every command:
a matrix or kernel file (:mod:`.files`), a ``models/`` checkpoint or an
adapter spec (:mod:`.checkpoint`), a third-party checkpoint whose layout is
detected (:mod:`.thirdparty`), every model's weights through one reader
(:mod:`.weights`), resolved in one order (:mod:`.paths`) by one loader
(:mod:`.load`)."""
