"""Built-in transformations and predicates: Kafka Connect's 16 Single Message Transforms, its 3
predicates and a SQL transform. They register through entry points, as a third-party transform
would (`connect_core.transforms`, `connect_core.predicates`)."""
