"""The door to the dependencies: every call to Elasticsearch and the model providers, its resilience stack, error
translation, server compatibility, what is known of the indices."""
