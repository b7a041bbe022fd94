"""dpcheck's rules, one module per rule (installed as ``dpcheck.rules``).

Adding a rule means adding one module here that defines a ``Rule`` subclass, plus its
fixtures in ``fixtures/``; the registry, the CLI, the docs, the README table and
``--confirm`` find it (``Rule.confirms``/``Rule.matches`` say which observations of the
harness confirm its findings; a dynamic rule's ``reports`` says which it reports).
"""
