"""Every operator's derivative on the embedded engine: state(v0) ⊎ Δ == Q(v1) as multisets."""

from __future__ import annotations

from tests.functional.differentiation.harness import Warehouse


def test_projection_and_filter_with_moves_in_and_out(wh: Warehouse) -> None:
    t = wh.table("t", "id bigint, v string, d date", [
        "(1, 'apple', date'2024-01-01')", "(2, 'banana', date'2024-02-01')", "(2, 'banana', date'2024-02-01')",
        "(null, 'cherry', null)", "(5, null, date'2024-03-03')",
    ])
    wh.check(
        f"""select id, upper(v) as uv, case when id > 1 then 'big' else 'small' end as size,
                   cast(id as double) as id_d, date_add(d, 1) as next_day, length(v) as len,
                   coalesce(v, 'none') as v2
            from {t}
            where (id is null or id in (1, 2, 3, 5)) and (v like '%an%' or v is null or id between 1 and 1)""",
        [f"insert into {t} values (3, 'mango', date'2024-04-04'), (2, 'banana', date'2024-02-01')",
         f"update {t} set v = 'pear' where id = 1",  # moves out of the filter
         f"update {t} set v = 'candy' where id is null",  # moves into it
         f"delete from {t} where id = 5"],
    )
