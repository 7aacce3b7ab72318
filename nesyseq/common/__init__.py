"""The bottom floor: helpers every other package may use (the one-line ``UserError``, how
the stock fairseq tools and ``user_dir`` are found and run).  It imports none of this
project's packages; see docs/architecture.md for the floors above it."""
