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
import os
from typing import Any

log = logging.getLogger(__name__)


class KubeconfigError(ValueError):
    """The API server's configuration cannot be loaded: a kubeconfig that is missing,
    unreadable or invalid, an unknown context, no ServiceAccount outside a pod. ``str(err)``
    is one line (which file, from where, what to do); ``gangstate watch`` and ``sink`` exit 2
    with it."""


def kubeconfig_path(kubeconfig: str | None) -> tuple[str, str]:
    """``(path, where it came from)``: ``--kubeconfig``, else the first file of
    ``$KUBECONFIG``, else ``~/.kube/config`` (the ``kubernetes`` client's order)."""
    if kubeconfig:
        return kubeconfig, "--kubeconfig"
    env = os.environ.get("KUBECONFIG", "")
    if env:
        return env.split(os.pathsep)[0], "KUBECONFIG"
    return os.path.expanduser("~/.kube/config"), "the default"


def load_configuration(kubeconfig: str | None = None, context: str | None = None,
                       in_cluster: bool = False) -> Any:
    """A ``kubernetes.client.Configuration`` from the pod's ServiceAccount (``in_cluster``) or
    from ``kubeconfig`` (``None``: ``$KUBECONFIG`` or ``~/.kube/config``) and ``context``
    (``None``: the current one). Logs a WARNING when the configuration does not verify the API
    server's certificate. Raises ``KubeconfigError`` (one line) for a missing, unreadable or
    invalid kubeconfig, an unknown context, or ``in_cluster`` outside a pod."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    if in_cluster:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as err:
            raise KubeconfigError(f"--in-cluster: no ServiceAccount here ({err}); run it in a "
                                  f"pod, or give --kubeconfig") from None
    else:
        path, where = kubeconfig_path(kubeconfig)
        if len(os.environ.get("KUBECONFIG", "").split(os.pathsep)) <= 1 or kubeconfig:
            try:
                with open(path, "rb"):
                    pass
            except OSError as err:
                raise KubeconfigError(f"cannot read the kubeconfig {path} ({where}): "
                                      f"{err.strerror}; give a readable one with --kubeconfig "
                                      f"or KUBECONFIG, or --in-cluster in a pod") from None
        try:
            config.load_kube_config(config_file=kubeconfig, context=context,
                                    client_configuration=configuration)
        except Exception as err:  # noqa: BLE001 - ConfigException, yaml's errors, a bad key
            text = " ".join(str(err).split()) or type(err).__name__
            raise KubeconfigError(f"the kubeconfig {path} ({where}) cannot be used: "
                                  f"{text[:200]}; check it with `kubectl --kubeconfig {path} "
                                  f"config view`") from None
    if not configuration.verify_ssl and str(configuration.host).startswith("https"):
        log.warning("TLS verification of the API server %s is OFF: the kubeconfig sets "
                    "insecure-skip-tls-verify; give it the cluster's certificate-authority "
                    "instead", configuration.host)
    return configuration
