"""Value types: documents, results, answers, requests, the answer prompt. Pure."""
