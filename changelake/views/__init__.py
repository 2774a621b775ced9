"""Views derived from the change stream besides each table's current state (views.json), all
in this folder: their declarations (`config`, `*_config`), the pure DataFrame logic of each kind
(`history`, `enrichment`, `aggregate`, `windows`, `interval_join`), how readers see them
(`derived`), what `run` keeps for them (`table_histories`, `maintenance`), and what `status`
and `verify` say of them (`status`, `checks`)."""
