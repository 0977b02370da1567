"""The CDK app: the platform stack composed from ``platform_constructs``, cdk-nag and the delivery pipeline.

``app.py`` at the repository root (what ``cdk.json`` runs) builds it with :func:`infra.app.stacks.build_app`.
"""
