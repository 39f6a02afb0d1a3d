"""bench/RESULTS.md: each benchmark replaces only its own sections (by their `## ` heading)."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
TITLE = "# Benchmark results"


def write_sections(lines: list[str]) -> None:
    """Put the `## ` sections in `lines` into RESULTS.md, replacing those with the same heading."""
    new = _split("\n".join(lines))
    old = _split(RESULTS.read_text()) if RESULTS.exists() else {}
    merged = {**old, **new}  # a section is its whole heading: a run at another size adds its own
    RESULTS.write_text(TITLE + "\n\n" + "\n".join(f"{h}\n{b.rstrip()}\n" for h, b in merged.items()))
    print("\n".join(lines))


def _split(text: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    return sections
