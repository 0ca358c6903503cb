"""NO_DATA decided without the DT's lease, where taking it costs writes: in an object store
(docs/ARCHITECTURE.md, "Object storage"; ``claims.py`` keeps what it decides from standing
against a refresh that held the lease).

The pipeline decides once from the frontier it reads, reading the DT's log and its sources' as
it always does. Only a NO_DATA that moves the frontier to the same source versions and the same
DT version, with nothing to recover, no graph row and no table feature to write, settles there;
anything else raises :class:`NeedsLease`, and the refresh is decided again under the lease,
exactly as without this path.
"""

from __future__ import annotations

from typing import Optional

from dbt.adapters.dyntable.dynamic_table.claims import lease_free
from dbt.adapters.dyntable.dynamic_table.lifecycle import Action, RefreshRequest
from dbt.adapters.dyntable.dynamic_table.metadata import Frontier, MetadataStore
from dbt.adapters.dyntable.dynamic_table.model import DynamicTable
from dbt.adapters.dyntable.dynamic_table.refresh.facts import Decision, Definition, Observation
from dbt.adapters.dyntable.dynamic_table.refresh.record import Recorder


class NeedsLease(Exception):
    """The refresh does not settle as NO_DATA without its DT's lease: decide it under it."""


def may_decide(metadata: MetadataStore, dt: DynamicTable, request: RefreshRequest) -> bool:
    """Whether ``dt``'s refresh may be decided without its lease: locks in an object store,
    inside a batch (its frontier and history wait for the batch's end, which checks them), not
    a rebuild a person asked for nor `--empty`, and no comments to keep on the table (which
    would be written)."""
    return (
        lease_free(metadata.locks)
        and metadata.batch_open
        and not request.full_refresh
        and not request.empty
        and not (dt.docs.table or dt.docs.columns)
    )


def settled(frontier: Optional[Frontier]) -> bool:
    """A frontier with no intent pending: nothing to recover before deciding."""
    return frontier is not None and frontier.pending is None and frontier.updated_at is not None


def check_observed(definition: Definition, observed: Observation) -> None:
    """Every source at the version consumed, none lost, the DT's log there: else NeedsLease."""
    unchanged = all(s.start == s.end and s.lost is None for s in observed.sources)
    if definition.rebuild_reason is not None or observed.dt_log is None or not unchanged:
        raise NeedsLease()


def check_settles(recorder: Recorder, dt: DynamicTable, observed: Observation, decision: Decision) -> None:
    """A NO_DATA that writes no graph row: else NeedsLease."""
    if decision.action is not Action.NO_DATA or not recorder.graph_unchanged(dt, observed.versions):
        raise NeedsLease()
