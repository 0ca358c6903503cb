"""An intent carried in the DT's own commit (docs/ARCHITECTURE.md, "Exactly once"): written
where the writer can put text in that commit, read back by recovery. Two places hold it: the
commit's ``userMetadata`` (deltalake's commit properties, the engine's append option), or, for an
engine MERGE where the engine records its ON condition (``Capabilities.merge_condition_recorded``),
a constant conjunct of that condition.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any, Mapping, Optional

from dbt.adapters.dyntable.dynamic_table.metadata import Intent

#: The key of the JSON object a DT commit records as its ``commitInfo.userMetadata`` that carries
#: the intent of the refresh that wrote it: the key tells it from another writer's text.
CARRIED_INTENT = "dyntable.intent"
#: The carried text in a MERGE's condition: base64 (letters, digits, ``-_=``), which an engine
#: recording the condition re-spaces or re-quotes nowhere (Sail re-renders the text it records).
_IN_CONDITION = re.compile(re.escape(CARRIED_INTENT) + r":([A-Za-z0-9_=-]+)")


def carrying(intent: Intent) -> str:
    """The ``userMetadata`` of a DT commit that carries ``intent``."""
    return json.dumps({CARRIED_INTENT: intent.to_json()})


def carrying_condition(user_metadata: str) -> str:
    """A conjunct for a MERGE's ON condition, always true, whose recorded text carries
    ``user_metadata`` (:func:`carrying`)."""
    encoded = base64.urlsafe_b64encode(user_metadata.encode()).decode()
    return f"'{CARRIED_INTENT}:{encoded}' IS NOT NULL"


def carried_intent(commit_info: Mapping[str, Any]) -> Optional[Intent]:
    """The intent a DT commit carries (:func:`carrying`, :func:`carrying_condition`), or None:
    another writer's commit."""
    text = commit_info.get("userMetadata")
    parameters = commit_info.get("operationParameters")
    condition = parameters.get("mergePredicate") if isinstance(parameters, Mapping) else None
    found = _IN_CONDITION.search(condition) if isinstance(condition, str) and text is None else None
    try:
        if found is not None:
            text = base64.urlsafe_b64decode(found.group(1)).decode()
        carried = json.loads(text or "")
    except (TypeError, ValueError, binascii.Error):  # none, or another writer's text
        return None
    intent = carried.get(CARRIED_INTENT) if isinstance(carried, dict) else None
    return Intent.from_json(intent) if isinstance(intent, str) else None
