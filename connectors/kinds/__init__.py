"""One module per kind of source; each yields `connectors.base.SourceItem`s and nothing else."""
