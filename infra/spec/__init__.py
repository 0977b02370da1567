"""The cluster spec: the pydantic models of one YAML file that declares a whole training platform, loading it,
the rules across fields, warnings, and the reference docs rendered from the models.

No CDK here: the CLI, the node agent and the governance code use it without pulling aws-cdk-lib.
"""
