"""``manage.py check_kubernetes``: is there a usable Kubernetes configuration, and which API server does it name?"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduler_core.kube.api import KubeConfigError, load_api_client


class Command(BaseCommand):
    help = (
        "Check that a Kubernetes configuration is there and usable (in-cluster, $KUBECONFIG or ~/.kube/config) "
        "and print the API server it names; exit 1 saying why not. Contacts no server."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kubeconfig", help="a kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            api_client = load_api_client(kubeconfig=options["kubeconfig"])
        except KubeConfigError as exc:
            raise CommandError(f"the Kubernetes configuration is unusable: {exc}") from exc
        if api_client is None:
            raise CommandError(
                "no Kubernetes configuration found: not in a cluster, no KUBECONFIG, no ~/.kube/config "
                "(make run serves a demo cluster without one)"
            )
        self.stdout.write(f"Kubernetes API server: {api_client.configuration.host}")
