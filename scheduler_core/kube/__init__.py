"""The Kubernetes adapters: the only modules that talk to an API server.

``api`` (configuration and binding), ``http`` (posting through the client's pool), ``events`` (Events about pods;
``pod_event`` describes one and its writer, without the client), ``watch`` (list + watch), ``node_cache`` (the cluster
view a process keeps from them), ``placement_watch`` (where pods really went) and ``scheduler_config`` (the
kube-scheduler configurations ``make serve`` writes). Only ``api``, ``http``, ``events`` and ``watch`` import the
``kubernetes`` package. May import the hot path's protocol and record (the interfaces they implement); the hot path
never imports them.
"""
