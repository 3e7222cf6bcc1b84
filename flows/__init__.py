"""Prefect flows: thin orchestration of sdc_tasks library calls."""
