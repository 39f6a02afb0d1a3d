"""The REST API: Kafka Connect and RocketMQ Connect dialects over one service."""
