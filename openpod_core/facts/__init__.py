"""The facts register: every external fact the platform relies on, with its source and the date it was checked.

A fact is a value someone else decides - a library's installed file name, a version
pin, an image path, a hardware figure. Each subject has its table (``training_image``,
``instances``, ``eks_addons``, ``device_plugins``, ``capacity``, ``updates``,
``scheduling``, ``observability``, ``trust``) of :class:`record.Fact` rows; ``register``
joins them and looks a fact up by key, ``unverified`` lists what has no source yet.
Code that depends on a fact reads it through ``register``, tests check the code
against it, and ``docs/facts.md`` renders the tables, so a reader can audit each
value against its source.
"""
