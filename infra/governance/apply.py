"""Create objects through the Kubernetes API (the kubernetes Python client)."""

from __future__ import annotations

from typing import Any


class ClusterError(RuntimeError):
    """No usable kubeconfig, cluster unreachable, or the API server refused the object."""


def _client(kubeconfig: str | None, context: str | None):
    try:
        from kubernetes import client, config
    except ImportError:  # pragma: no cover - the k8s extra is missing
        raise ClusterError("the kubernetes package is not installed; pip install 'openpod[k8s]'") from None
    try:
        config.load_kube_config(config_file=kubeconfig, context=context)
    except config.ConfigException as first:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            raise ClusterError(f"no usable kubeconfig ({first}); run `aws eks update-kubeconfig --name <cluster>` "
                               "or pass --kubeconfig, or use --dry-run") from None
    except OSError as e:
        raise ClusterError(f"cannot read kubeconfig {kubeconfig or '~/.kube/config'}: {e.strerror or e}") from None
    return client


def create_jobset(obj: dict[str, Any], *, kubeconfig: str | None = None, context: str | None = None) -> None:
    client = _client(kubeconfig, context)
    api = client.CustomObjectsApi()
    group, version = obj["apiVersion"].split("/")
    try:
        api.create_namespaced_custom_object(group, version, obj["metadata"]["namespace"], "jobsets", obj,
                                            _request_timeout=20)
    except client.ApiException as e:
        reason = e.reason
        try:
            import json

            reason = json.loads(e.body).get("message", reason)
        except (TypeError, ValueError):
            pass
        raise ClusterError(f"the API server refused the JobSet ({e.status}): {reason}") from None
    except Exception as e:  # urllib3 connection errors carry no common base worth importing
        if type(e).__module__.startswith(("urllib3", "socket", "ssl")) or isinstance(e, OSError):
            raise ClusterError(f"cannot reach the cluster API server: {e.__class__.__name__}: "
                               f"{str(e).splitlines()[0][:200]}") from None
        raise
