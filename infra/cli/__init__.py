"""The `openpod` command line: :mod:`infra.cli.main` holds the click group and the spec and governance commands,
one module per other command family, and :mod:`infra.cli.common` what they share.
"""
