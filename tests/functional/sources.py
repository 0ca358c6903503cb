"""The sources YAML of tests whose raw tables live in ``<target schema>_raw``."""


def raw_sources(*tables: str) -> str:
    """A `sources.yml` declaring ``tables`` as source ``raw``, in the test schema's ``_raw`` sibling."""
    listed = "".join(f"      - name: {table}\n" for table in tables)
    return f'version: 2\nsources:\n  - name: raw\n    schema: "{{{{ target.schema }}}}_raw"\n    tables:\n{listed}'
