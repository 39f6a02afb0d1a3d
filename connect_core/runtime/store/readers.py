"""Which sinks read which topics, in SQL: the `sink_topics` CTE that metrics and topic retention share.

A sink's topics are in its config as a list or a comma-separated string (`connect.topicnames`
first, as the sink config model reads them). `tasks` is the sink's task count (partition p of
a topic belongs to task p mod tasks, as the runner assigns them).
"""

from __future__ import annotations

__all__ = ["SINK_TOPICS"]

#: `WITH` clauses ending in `sink_topics(name, tasks, topic)`: one row per sink and topic it reads.
SINK_TOPICS = """
    WITH sinks AS (
        SELECT c.name, coalesce(c.config->'connect.topicnames', c.config->'topics') AS topics,
               greatest((SELECT count(*) FROM connect.task_configs t WHERE t.connector = c.name), 1) AS tasks
        FROM connect.connectors c
        WHERE c.type = 'sink'),
    sink_topics AS (
        SELECT DISTINCT s.name, s.tasks, btrim(t.topic) AS topic
        FROM sinks s
        CROSS JOIN LATERAL (
            SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(s.topics) = 'array' THEN s.topics END)
            UNION ALL
            SELECT regexp_split_to_table(CASE WHEN jsonb_typeof(s.topics) = 'string' THEN s.topics #>> '{}' END, ',')
        ) AS t(topic))
"""
