"""CDK constructs of the platform, one per concern.

Named ``platform_constructs`` and not ``constructs``: a top-level package
called ``constructs`` would shadow the ``constructs`` library that aws-cdk-lib
itself imports, and every ``import aws_cdk`` would break.
"""
