"""What each placement did to traffic afterwards: the estimate a decision made, the traffic that followed, their
error, and how balanced the nodes are (issue 32).

``arithmetic`` is the plain arithmetic (no I/O); ``sources`` the interface a reader of traffic after a bind offers,
``queries`` its PromQL, ``prometheus_source`` and ``synthetic`` the two readers.
"""
