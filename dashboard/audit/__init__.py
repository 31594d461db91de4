"""Tamper evidence of the record and who may read it: the hash chain over the stored calls and its lock (``chain``),
the auditor group (``auditors``)."""
