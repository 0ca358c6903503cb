"""Which SQL functions a derivative may re-evaluate, and which are aggregates or window functions.

A derivative evaluates expressions again at other versions than the stored state was computed
at, so every function must give the same result for the same arguments. sqlglot models most
Spark functions as typed nodes, all deterministic except the few listed here; functions it does
not know (``exp.Anonymous``, including UDFs) pass only when named in an allowlist of Spark
built-ins or in the caller's ``deterministic_functions``.
"""

from __future__ import annotations

from typing import FrozenSet, Optional, Type

from sqlglot import exp

NONDETERMINISTIC_NODES: tuple[Type[exp.Expression], ...] = tuple(
    node
    for node in (
        getattr(exp, name, None)
        for name in (
            "Rand",
            "Randn",
            "Uuid",
            "CurrentTimestamp",
            "CurrentDate",
            "CurrentTime",
            "CurrentDatetime",
            "CurrentUser",
            "CurrentSchema",
            "CurrentCatalog",
            "Shuffle",
            "Localtimestamp",
            "CurrentTimestampLTZ",
            "AnyValue",
        )
    )
    if node is not None
)

#: Spark built-ins sqlglot parses as anonymous functions, all deterministic.
DETERMINISTIC_BUILTINS: FrozenSet[str] = frozenset(
    """hash xxhash64 crc32 sha sha1 base64 unbase64 levenshtein soundex initcap translate
    format_string printf conv bin hex unhex ascii char chr left right reverse repeat ltrim rtrim
    btrim split_part regexp_replace regexp_like rlike date_part datepart dayofweek dayofmonth
    dayofyear weekofyear weekday quarter hour minute second last_day next_day add_months
    months_between trunc date_trunc make_date make_timestamp to_json from_json map_keys map_values
    array_distinct array_union array_intersect array_except array_join array_position array_remove
    array_repeat sort_array array_sort flatten sequence slice arrays_zip map_from_arrays str_to_map
    nanvl isnan signum sign pmod positive negative bround cbrt degrees radians factorial e pi
    width_bucket decode encode octet_length bit_length char_length character_length typeof
    equal_null nvl2 zeroifnull nullifzero date_from_unix_date unix_date timestamp_seconds
    timestamp_millis unix_seconds unix_millis try_add try_divide try_multiply try_subtract contains
    startswith endswith mask substring_index overlay find_in_set elt locate position format_number
    array map get every some any bool_and bool_or hypot expm1 log1p bitwise_not shiftrightunsigned
    negate isnull isnotnull arrays_overlap cardinality forall zip_with map_concat map_entries
    map_filter map_zip_with transform_keys transform_values json_array_length from_csv to_csv
    from_xml to_xml schema_of_csv schema_of_json sentences regexp url_encode url_decode
    try_url_decode try_parse_url is_valid_utf8 validate_utf8 try_validate_utf8 make_valid_utf8
    to_varchar try_to_number try_to_binary try_to_timestamp to_timestamp_ntz timestamp_micros
    make_timestamp_ntz try_make_timestamp try_make_timestamp_ntz make_dt_interval make_ym_interval
    try_make_interval try_mod try_parse_json variant_get try_variant_get aes_decrypt
    try_aes_decrypt xpath xpath_boolean xpath_double xpath_float xpath_int xpath_long
    xpath_number xpath_short xpath_string mean std try_sum try_avg""".split()
)

#: Spark built-ins sqlglot parses as anonymous functions that read the clock, the row's file or
#: partition, or a random source.
NONDETERMINISTIC_BUILTINS: FrozenSet[str] = frozenset(
    """now monotonically_increasing_id input_file_name input_file_block_start
    input_file_block_length spark_partition_id uuid random rand randn shuffle current_timestamp
    current_date localtimestamp current_timezone user session_user current_user version
    aes_encrypt reflect java_method try_reflect""".split()
)

#: Anonymous-parsed aggregates (sqlglot knows bool_and/bool_or, but not these spellings), all
#: independent of the order rows arrive in.
ANONYMOUS_AGGREGATES: FrozenSet[str] = frozenset(
    {"every", "some", "any", "bool_and", "bool_or", "mean", "std", "try_sum", "try_avg"}
)

#: Aggregates whose result does not depend on input order, so recomputing a group is exact.
ORDER_INDEPENDENT_AGGREGATES: tuple[Type[exp.Expression], ...] = tuple(
    node
    for node in (
        getattr(exp, name, None)
        for name in (
            "Count",
            "Sum",
            "Avg",
            "Min",
            "Max",
            "LogicalAnd",
            "LogicalOr",
            "CountIf",
            "Stddev",
            "StddevPop",
            "StddevSamp",
            "Variance",
            "VariancePop",
            "ApproxDistinct",
            "Quantile",
            "Median",
            "ApproxQuantile",
            "PercentileCont",
            "PercentileDisc",
        )
    )
    if node is not None
)

#: Window functions: ranking and offset functions, and first/last values.
RANKING_FUNCTIONS: tuple[Type[exp.Expression], ...] = tuple(
    node
    for node in (
        getattr(exp, name, None)
        for name in (
            "RowNumber",
            "Rank",
            "DenseRank",
            "PercentRank",
            "CumeDist",
            "Ntile",
            "Lag",
            "Lead",
            "First",
            "Last",
            "FirstValue",
            "LastValue",
            "NthValue",
        )
    )
    if node is not None
)


#: Functions valid only in an OVER clause (first/last are also aggregates, so not listed).
WINDOW_ONLY_FUNCTIONS: tuple[Type[exp.Expression], ...] = tuple(
    f for f in RANKING_FUNCTIONS if f not in (getattr(exp, "First", None), getattr(exp, "Last", None))
)


def is_aggregate(node: exp.Expression) -> bool:
    """An aggregate call (outside any OVER clause; callers skip window subtrees)."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in ANONYMOUS_AGGREGATES
    return isinstance(node, exp.AggFunc) and not isinstance(node, WINDOW_ONLY_FUNCTIONS)


def nondeterminism(node: exp.Expression, deterministic_functions: FrozenSet[str]) -> Optional[str]:
    """Why ``node`` itself (not its children) may give different results on re-evaluation.

    >>> import sqlglot
    >>> nondeterminism(sqlglot.parse_one("upper(x)", read="spark"), frozenset()) is None
    True
    >>> nondeterminism(sqlglot.parse_one("now()", read="spark"), frozenset())
    'now() is not deterministic: re-evaluating it would not reproduce the stored rows'
    >>> nondeterminism(sqlglot.parse_one("my_udf(x)", read="spark"), frozenset({"my_udf"})) is None
    True
    """
    if isinstance(node, NONDETERMINISTIC_NODES):
        return f"{node.key} is not deterministic: re-evaluating it would not reproduce the stored rows"
    if isinstance(node, exp.StrToUnix) and node.this is None:
        return "unix_timestamp() without arguments reads the clock"
    if isinstance(node, exp.Anonymous):
        name = node.name.lower()
        if name in NONDETERMINISTIC_BUILTINS:
            return f"{name}() is not deterministic: re-evaluating it would not reproduce the stored rows"
        if name in DETERMINISTIC_BUILTINS or name in deterministic_functions:
            return None
        return (
            f"function {name} is not a known deterministic built-in; if it is a deterministic UDF, "
            "list it in the model's deterministic_functions config"
        )
    return None
