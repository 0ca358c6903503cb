from dbt.adapters.base.plugin import AdapterPlugin

from dbt.adapters.dyntable.connections import DyntableConnectionManager, DyntableCredentials  # noqa: F401
from dbt.adapters.dyntable.impl import DyntableAdapter
from dbt.include import dyntable

Plugin = AdapterPlugin(
    adapter=DyntableAdapter,  # type: ignore[arg-type]
    credentials=DyntableCredentials,
    include_path=dyntable.PACKAGE_PATH,
    dependencies=["spark"],
    # The include project's name (dbt_project.yml): dbt treats only the plugin's named project as
    # an adapter package, and only adapter packages' dyntable__* macros override dispatched ones.
    project_name="dyntable",
)
