"""The files ``openpod init DIR`` writes (:mod:`infra.cli.init`): a platform team's own repository, openpod
installed as a pinned package. ``openpod.yaml`` is a copy of ``examples/default.yaml`` (tests/test_init.py keeps
them equal); ``*.tmpl`` are written with ``@OPENPOD_VERSION@`` replaced."""
