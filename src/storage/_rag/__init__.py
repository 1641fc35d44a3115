"""Answers with citations: the context and the answering service."""
