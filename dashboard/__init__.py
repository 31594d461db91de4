"""The Django side of schedlens: settings, the extender views, the cycle record, and (later) the UI and API."""
