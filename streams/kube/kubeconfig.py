"""How ``gangstate watch`` and ``gangstate sink`` reach the Kubernetes API server.

Where it sits: the shell. Both commands build their ``kubernetes.client.Configuration`` with
``load_configuration`` and nothing else, so both reach the API server the same way: host,
credentials and TLS from the kubeconfig (``--kubeconfig``, ``$KUBECONFIG`` or
``~/.kube/config``, with ``--context``) or, in a pod, from its ServiceAccount.

TLS: the API server's certificate is verified against the kubeconfig's
``certificate-authority`` or ``certificate-authority-data`` (the ``kubernetes`` client turns
either into ``ssl_ca_cert``, ``config/kube_config.py`` ``_load_cluster_info``; in a pod, the
ServiceAccount's ``ca.crt``, ``config/incluster_config.py``), or the system's trusted CAs when
the kubeconfig names none; the client then requires a valid certificate
(``client/rest.py``: ``cert_reqs = ssl.CERT_REQUIRED`` while ``verify_ssl``). Nothing here
turns verification off. A kubeconfig that does (``insecure-skip-tls-verify: true``) is obeyed,
as kubectl obeys it, but never silently: a WARNING says so once.

Must not: change the TLS settings the kubeconfig gives, or keep a process-wide default
configuration (``load_incluster_config()`` without a configuration would set one).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def load_configuration(kubeconfig: str | None = None, context: str | None = None,
                       in_cluster: bool = False) -> Any:
    """A ``kubernetes.client.Configuration`` from the pod's ServiceAccount (``in_cluster``) or
    from ``kubeconfig`` (``None``: ``$KUBECONFIG`` or ``~/.kube/config``) and ``context``
    (``None``: the current one). Logs a WARNING when the configuration does not verify the API
    server's certificate. Raises what the ``kubernetes`` client raises for a missing or
    invalid kubeconfig (``ConfigException``, ``OSError``)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=kubeconfig, context=context,
                                client_configuration=configuration)
    if not configuration.verify_ssl and str(configuration.host).startswith("https"):
        log.warning("TLS verification of the API server %s is OFF: the kubeconfig sets "
                    "insecure-skip-tls-verify; give it the cluster's certificate-authority "
                    "instead", configuration.host)
    return configuration
