"""The local real control plane (koord-scheduler, KWOK): ``deploy.cluster.controlplane``."""
