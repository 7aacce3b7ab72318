"""SLURM dispatch (submitit).  Not implemented yet: the one-command cluster
launch is tracked by a later issue; this package only reserves the layout."""
