"""Export: a knowledge base, folder or page out as a zip of Markdown files with their assets
(docs/export.md). ``service`` decides and streams; ``names`` makes file names safe and unique.
The way back in is ``openkb/importing/openkb_export.py``."""
