"""The runner's live page, its JSON API, /metrics and health checks (`dyntable run --ui`,
`dyntable ui`): a Starlette app served by uvicorn on a thread of the runner's process."""
