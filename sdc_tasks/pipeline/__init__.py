"""The release pipeline as library functions (no Prefect): the spec, the stages, the gate and the release summary."""
