"""The oracle suite's parts: seeded mutants of healthy fixtures (``mutants``), the official
clients that read a body and give their verdict (``clients``, ``node_clients.mjs``), and the
one table of argued exceptions (``exceptions``). ``tests/test_oracle.py`` runs them."""
