"""Lowering a query's clauses to plan nodes, one module per clause (as sqlglot's optimizer has one
module per rule): :class:`~..planner.Planner` holds what they share (names, declared keys, schemas,
column resolution) and dispatches a query to them (docs/ARCHITECTURE.md, "Planning and row keys").
"""
