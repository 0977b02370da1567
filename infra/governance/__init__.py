"""Task governance: Kueue queues, quotas, priorities and RBAC from a spec, and JobSets for ``submit``.

Pure Python, no CDK: the CLI writes these objects as YAML and the
TaskGovernance construct applies the very same list.
"""

from infra.governance.objects import all_objects, render, write

__all__ = ["all_objects", "render", "write"]
