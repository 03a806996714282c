"""CoMLRL 1.4.3 golden cases, a module per tests/golden/comlrl*.test.ts file (run by ../make_comlrl_goldens.py)."""
