"""How the `dyntable` CLI writes times and sizes its tables."""

from datetime import datetime, timedelta, timezone

from rich.console import Console

from dbt.adapters.dyntable.cli import output as cli


def test_clock_text_shows_the_date_only_when_it_is_not_today():
    now = datetime.now(timezone.utc).replace(microsecond=0)
    assert cli.clock_text(now) == now.strftime("%H:%M:%S")
    earlier = now - timedelta(days=2)
    assert cli.clock_text(earlier) == earlier.strftime("%Y-%m-%d %H:%M:%S")
    naive_utc = now.replace(tzinfo=None)  # metadata tables hold UTC without a zone
    assert cli.clock_text(naive_utc) == now.strftime("%H:%M:%S")
    assert cli.clock_text(None) == "-"


def test_a_status_row_stays_on_one_line_when_piped(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    console = cli._console()  # pytest captures stdout: not a terminal
    assert console.width == cli.PIPED_WIDTH
    table = cli.titled_table(
        "Dynamic tables",
        (
            "dynamic table",
            "target lag",
            "period",
            "data timestamp",
            "current lag",
            "state",
            "last action",
            "failures",
        ),
        cli.TIMES_IN_UTC,
    )
    table.add_row(
        "latest_order_per_customer",
        "downstream → 2 minutes",
        "48.0 s",
        "19:12:48",
        "35.3 s",
        "ACTIVE",
        "INCREMENTAL SUCCEEDED",
        "0",
    )
    render = Console(width=console.width, record=True)
    render.print(table)
    lines = render.export_text().splitlines()
    assert any("latest_order_per_customer" in line and "INCREMENTAL SUCCEEDED" in line for line in lines)
    assert lines[-1].strip() == cli.TIMES_IN_UTC
