"""The read-only audit REST API under ``/api/v1/``: thin views over ``selectors``, serializers and filters."""
