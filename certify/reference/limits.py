"""The sizes the reference checker re-derives; above them it refuses (exit 2, one
line naming the size and the limit). Large enough for every committed
certificate (kernels of up to 64 tokens and a few hundred features, the
feasibility, audit and transcript certificates of ``reports/``)."""

#: entries of a kernel matrix (rows x columns) multiplied out and ranked exactly
MAX_MATRIX_ENTRIES = 1 << 20
#: entries of one feature matrix (tokens x features) read or embedded
MAX_FEATURE_ENTRIES = 1 << 22
#: degree of a characteristic polynomial (eps_rank, PSD tests)
MAX_CHARPOLY_DEGREE = 512
#: bytes of a source file re-read exactly
MAX_FILE_BYTES = 256 << 20
#: characters of one number in a CSV or JSON source
MAX_NUMBER_CHARS = 4000
#: scored positions (inputs x length) of a family a head is evaluated on
MAX_FAMILY_POSITIONS = 1 << 22
#: assignments of a transcript family replayed in Fractions
MAX_TRANSCRIPT_ASSIGNMENTS = 1 << 12
#: the code length m of a closed-form bound
MAX_BOUND_M = 1 << 13
