"""What is known to break: rules and tables as data, the evaluators they name, one engine."""
