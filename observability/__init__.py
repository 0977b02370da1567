"""Observability as data: the platform's metric table, Prometheus rules, scrape configuration and dashboards."""
