"""dpcheck's rules, one module per rule (installed as ``dpcheck.rules``).

Adding a rule means adding one module here that defines a ``Rule`` subclass, plus its
fixtures in ``fixtures/``; the registry, the CLI, the docs and the README table find it.
"""
