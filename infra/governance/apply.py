"""Create objects through the Kubernetes API (the kubernetes Python client)."""

from __future__ import annotations

from typing import Any

from infra.governance import compute_domain


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
    except Exception as e:  # noqa: BLE001 - a file that is not a kubeconfig: YAMLError, TypeError, KeyError...
        detail = (str(e).strip().splitlines() or [""])[0]
        raise ClusterError(f"{kubeconfig or '~/.kube/config'} is not a kubeconfig ({type(e).__name__}: "
                           f"{detail}); `aws eks update-kubeconfig --name <cluster>` writes one") from None
    return client


def create_jobset(obj: dict[str, Any], *, kubeconfig: str | None = None, context: str | None = None,
                  secret: dict[str, Any] | None = None, owned: list[dict[str, Any]] = ()) -> None:
    """Create the JobSet, then ``secret`` and the custom objects ``owned`` (``plural`` taken from
    ``OWNED_PLURALS``), each owned by it (deleted with it); if one is refused, the JobSet is deleted again,
    so nothing half-made is left."""
    client = _client(kubeconfig, context)
    api = client.CustomObjectsApi()
    group, version = obj["apiVersion"].split("/")
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    try:
        created = api.create_namespaced_custom_object(group, version, ns, "jobsets", obj, _request_timeout=20)
    except client.ApiException as e:
        raise ClusterError(f"the API server refused the JobSet ({e.status}): {_reason(e)}") from None
    except Exception as e:  # urllib3 connection errors carry no common base worth importing
        _unreachable(e)
    owner = [{"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": name,
              "uid": (created.get("metadata") or {}).get("uid", "")}]
    for extra in ([secret] if secret is not None else []) + list(owned):
        mine = {**extra, "metadata": {**extra["metadata"], "ownerReferences": owner}}
        try:
            if extra["kind"] == "Secret":
                client.CoreV1Api().create_namespaced_secret(ns, mine, _request_timeout=20)
            else:
                g, v = extra["apiVersion"].split("/")
                api.create_namespaced_custom_object(g, v, ns, OWNED_PLURALS[extra["kind"]], mine,
                                                    _request_timeout=20)
        except Exception as e:  # noqa: BLE001 - undo the JobSet whatever went wrong
            try:
                api.delete_namespaced_custom_object(group, version, ns, "jobsets", name, _request_timeout=20)
            except Exception:  # noqa: BLE001 - reported below
                pass
            what = f"({e.status}): {_reason(e)}" if isinstance(e, client.ApiException) else f"({type(e).__name__})"
            raise ClusterError(f"the API server refused the {extra['kind']} {extra['metadata']['name']} {what}; "
                               f"the JobSet {name} was deleted again") from None


# Custom objects `create_jobset` may create next to a JobSet: kind -> plural.
OWNED_PLURALS = {compute_domain.KIND: compute_domain.PLURAL}


def _reason(e) -> str:
    import json

    try:
        return json.loads(e.body).get("message", e.reason)
    except (TypeError, ValueError):
        return e.reason


def _unreachable(e: Exception) -> None:
    if type(e).__module__.startswith(("urllib3", "socket", "ssl")) or isinstance(e, OSError):
        raise ClusterError(f"cannot reach the cluster API server: {e.__class__.__name__}: "
                           f"{str(e).splitlines()[0][:200]}") from None
    raise e

