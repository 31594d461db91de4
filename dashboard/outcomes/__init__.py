"""What each placement did to traffic afterwards (issue 32): the outcome job, its rows, and the balance series."""
