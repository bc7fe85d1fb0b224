"""Matrix, natively: /sync long polling with a durable token, edits, threads and reactions."""
