"""Facts every part of openpod shares: the instance table and the Kubernetes keys.

The CDK app (``infra``, ``platform_constructs``), the node agent and the training
runtime all import these modules; none of them needs CDK, boto3 or torch, so each
image can install the core alone.
"""
