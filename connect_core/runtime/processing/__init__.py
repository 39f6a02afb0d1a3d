"""Record processing between a task and the topic: transform chains (Kafka's SMTs and predicates, as
column expressions over a batch) and their configuration."""
