"""An API client from the in-cluster service account or a kubeconfig file."""

from __future__ import annotations

import os
from typing import Any

from kubernetes import client as _client
from kubernetes import config as _config

from planner.errors import SourcePermanentError

# The client library ships no type information.
k8s_client: Any = _client
k8s_config: Any = _config


def api_client_from_config(kubeconfig: str | None = None) -> Any:
    """``kubernetes.client.ApiClient`` configured in-cluster (when ``KUBERNETES_SERVICE_HOST``
    is set and no ``kubeconfig`` is given) or from ``kubeconfig`` (default: ``$KUBECONFIG`` or
    ``~/.kube/config``). Raises ``SourcePermanentError`` saying what is missing."""
    try:
        if os.environ.get("KUBERNETES_SERVICE_HOST") and not kubeconfig:
            k8s_config.load_incluster_config()
        else:
            k8s_config.load_kube_config(config_file=kubeconfig)
    except (k8s_config.ConfigException, OSError, TypeError) as exc:
        raise SourcePermanentError(
            "kubernetes:config",
            f"no usable Kubernetes configuration ({exc}); run in a pod with a service account "
            "or set PLANNER_KUBERNETES__KUBECONFIG",
        ) from None
    return k8s_client.ApiClient()
