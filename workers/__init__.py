"""huey adapter: the queue instance, the task wrapper and the consumer entry point."""
