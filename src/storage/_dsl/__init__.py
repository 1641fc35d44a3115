"""What is sent to Elasticsearch, built as data: query bodies, filters, the query syntax, tenancy, the index
mapping, aggregations, query text hygiene. Pure: dict in, dict out."""
