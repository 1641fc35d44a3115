"""Structured logs, tracing spans, search telemetry and the Kibana objects."""
