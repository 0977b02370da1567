"""The Kubernetes calls the agent makes, through the official client's own ApiClient, without its generated API
classes.

Importing ``kubernetes.client.CoreV1Api`` loads the generated 4.4 MB ``core_v1_api.py``: 77-81 MB of resident
memory (kubernetes client 37.0.1, measured: 44 -> 125 MB), which put the detector over its 100 MB target
(docs/node-agent.md, Performance). Each method here builds the same request the generated one builds (path,
query names, Accept and patch Content-Type lists, BearerToken auth) and hands it to the same ApiClient pipeline
(``param_serialize``, ``_call_with_legacy_options``: deserialisation and ``ApiException`` as before), so the
KubeCluster boundary behaves as it did on CoreV1Api / BatchV1Api.
"""

from __future__ import annotations

from typing import Any

_ACCEPT = ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "application/cbor"]
# The generated patch methods' list; the client's REST layer sends a dict body as a strategic merge patch.
_PATCH = ["application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json",
          "application/apply-patch+yaml", "application/apply-patch+cbor"]


class KubeApi:
    """CoreV1 / BatchV1 methods by the generated names and argument order the agent uses."""

    def __init__(self, api_client) -> None:
        self.api_client = api_client

    def _call(self, method: str, path: str, response_type: str | None, *, query: dict | None = None,
              body: Any = None, patch: bool = False, accept: list[str] = _ACCEPT, preload: bool = True,
              **path_params: str) -> Any:
        ac = self.api_client
        headers = {"Accept": ac.select_header_accept(accept)}
        if patch:
            headers["Content-Type"] = ac.select_header_content_type(_PATCH)
        req = ac.param_serialize(method=method, resource_path=path, path_params=path_params,
                                 query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
                                 header_params=headers, body=body, post_params=[], files={},
                                 auth_settings=["BearerToken"], collection_formats={})
        types = {code: response_type for code in ("200", "201", "202")}
        return ac._call_with_legacy_options(req, types, None, preload, None, True)

    # CoreV1
    def read_node(self, name: str):
        return self._call("GET", "/api/v1/nodes/{name}", "V1Node", name=name)

    def list_node(self, label_selector: str | None = None):
        return self._call("GET", "/api/v1/nodes", "V1NodeList", query={"labelSelector": label_selector})

    def patch_node(self, name: str, body: dict):
        return self._call("PATCH", "/api/v1/nodes/{name}", "V1Node", body=body, patch=True, name=name)

    def patch_node_status(self, name: str, body: dict):
        return self._call("PATCH", "/api/v1/nodes/{name}/status", "V1Node", body=body, patch=True, name=name)

    def create_namespaced_event(self, namespace: str, body):
        return self._call("POST", "/api/v1/namespaces/{namespace}/events", "CoreV1Event", body=body,
                          namespace=namespace)

    def list_pod_for_all_namespaces(self, field_selector: str | None = None):
        return self._call("GET", "/api/v1/pods", "V1PodList", query={"fieldSelector": field_selector})

    def list_namespaced_pod(self, namespace: str, label_selector: str | None = None):
        return self._call("GET", "/api/v1/namespaces/{namespace}/pods", "V1PodList",
                          query={"labelSelector": label_selector}, namespace=namespace)

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body):
        return self._call("POST", "/api/v1/namespaces/{namespace}/pods/{name}/eviction", "object", body=body,
                          name=name, namespace=namespace)

    def create_namespaced_secret(self, namespace: str, body):
        return self._call("POST", "/api/v1/namespaces/{namespace}/secrets", "object", body=body,
                          namespace=namespace)

    def create_namespaced_service(self, namespace: str, body):
        return self._call("POST", "/api/v1/namespaces/{namespace}/services", "object", body=body,
                          namespace=namespace)

    def read_namespaced_pod_log(self, name: str, namespace: str, _preload_content: bool = True):
        return self._call("GET", "/api/v1/namespaces/{namespace}/pods/{name}/log", "str",
                          accept=["text/plain", *_ACCEPT], preload=_preload_content, name=name, namespace=namespace)

    # BatchV1
    def create_namespaced_job(self, namespace: str, body):
        return self._call("POST", "/apis/batch/v1/namespaces/{namespace}/jobs", "V1Job", body=body,
                          namespace=namespace)

    def read_namespaced_job(self, name: str, namespace: str):
        return self._call("GET", "/apis/batch/v1/namespaces/{namespace}/jobs/{name}", "V1Job", name=name,
                          namespace=namespace)

    def delete_namespaced_job(self, name: str, namespace: str, propagation_policy: str | None = None):
        return self._call("DELETE", "/apis/batch/v1/namespaces/{namespace}/jobs/{name}", "object",
                          query={"propagationPolicy": propagation_policy}, name=name, namespace=namespace)
