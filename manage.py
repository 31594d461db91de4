#!/usr/bin/env python
"""Django's command-line utility for schedlens."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from config import server_env

    # Run beside `make run` or `make serve`, a command sees what that server sees (its database, its profiles).
    loaded = server_env.load()
    if loaded is not None:
        print(loaded.notice(), file=sys.stderr)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
