"""The ingest stage: decode a batch, store it with others in one transaction, fold it into memory."""
