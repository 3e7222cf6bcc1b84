"""Embedded default datasets (installed as ``sdc_tasks.data``): the Census and Tarragona test files and the demo spec."""
