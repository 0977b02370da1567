"""Lambda handlers that platform constructs bundle as assets (stdlib and the Lambda runtime's boto3 only)."""
