"""Planning time of the differentiation engine for a 10-join, 3-level query (target: < 100 ms).

Planning (parse, inline, lower) and differentiation (rules to SQL text) never touch an engine, so
this runs anywhere: ``python benchmarks/planning.py``.
"""

from __future__ import annotations

import statistics
import time

from dbt.adapters.dyntable.differentiation import differentiate, plan_query
from dbt.adapters.dyntable.differentiation.explain import SymbolicResolver
from dbt.adapters.dyntable.differentiation.plan import Join, SemiJoin

# Level 1: a view joining three tables; level 2: a CTE joining the view to three more and
# aggregating; level 3: the outer query joining the CTE to five more tables (10 joins in all).
VIEWS = {
    "s.enriched_orders": """
        select o.id, o.customer_id, o.product_id, o.amount, c.country, p.category
        from s.orders o
        join s.customers c on o.customer_id = c.id
        left join s.products p on o.product_id = p.id
    """,
}
QUERY = """
with per_region as (
    select e.country, r.region, e.category, count(*) as n, sum(e.amount) as total
    from s.enriched_orders e
    join s.countries k on k.code = e.country
    join s.regions r on r.id = k.region_id
    left join s.categories g on g.name = e.category
    where g.active or g.active is null
    group by e.country, r.region, e.category
)
select pr.country, pr.region, pr.category, pr.n, pr.total, m.manager, t.target, x.rate, h.holiday, cal.year
from per_region pr
join s.managers m on m.region = pr.region
left join s.targets t on t.region = pr.region and t.category = pr.category
left join s.fx_rates x on x.country = pr.country
left join s.holidays h on h.country = pr.country
left join s.calendars cal on cal.region = pr.region and cal.country = pr.country
where pr.total > 0
"""


def main(repeats: int = 50) -> None:
    from benchmarks.common import Goal, write_results

    plan_query(QUERY, views=VIEWS)  # warm up sqlglot's parser and dialect caches
    planning, differentiating = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        plan = plan_query(QUERY, views=VIEWS)
        planned = time.perf_counter()
        delta = differentiate(plan, SymbolicResolver())
        done = time.perf_counter()
        planning.append((planned - start) * 1000)
        differentiating.append((done - planned) * 1000)
    joins = sum(isinstance(node, (Join, SemiJoin)) for node in plan.root.walk())
    print(f"query: {joins} joins over {len(plan.sources)} tables, 3 levels (view, CTE, outer query)")
    print(f"plan_query:    median {statistics.median(planning):6.1f} ms   max {max(planning):6.1f} ms")
    print(
        f"differentiate: median {statistics.median(differentiating):6.1f} ms   max {max(differentiating):6.1f} ms"
    )
    total = [p + d for p, d in zip(planning, differentiating)]
    print(f"total:         median {statistics.median(total):6.1f} ms   (target < 100 ms)")
    print(f"delta SQL: {len(delta.sql):,} characters")
    median = statistics.median(total)
    write_results(
        "planning",
        "Planning a 10-join, 3-level query",
        "python -m benchmarks.planning",
        " ".join((__doc__ or "").split("\n\n")[1].split()),
        [
            Goal(
                "planning and differentiating a 10-join, 3-level query under 100 ms",
                f"{median:.1f} ms median of {repeats} (plan_query {statistics.median(planning):.1f} ms, "
                f"differentiate {statistics.median(differentiating):.1f} ms; {joins} joins over "
                f"{len(plan.sources)} tables)",
                median < 100,
            ),
        ],
        [],
    )


if __name__ == "__main__":
    main()
